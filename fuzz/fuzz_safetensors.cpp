// libFuzzer target: any byte string given to the safetensors parser must end in a parsed
// file or a brisk::Error, never a crash, an out-of-bounds read or a runaway allocation.
#include <cstddef>
#include <cstdint>

#include "format/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = brisk::SafetensorsFile::parse(data, size, "fuzz.safetensors");
    // Touch the first and last byte of every tensor: ASan flags any view that the
    // validation let point outside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : f->tensors()) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      const size_t n = t.nbytes();
      if (n) sink = sink + p[0] + p[n - 1];
      if (f->find(t.name) == nullptr) __builtin_trap();  // every tensor can be found by name
    }
  } catch (const brisk::Error&) {
  }
  return 0;
}
