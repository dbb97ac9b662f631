// libFuzzer target: any byte string given to the GGUF parser must end in a parsed file
// or a brisk::Error, never a crash, an out-of-bounds read or a runaway allocation.
#include <cstddef>
#include <cstdint>

#include "format/gguf.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = brisk::GgufFile::parse(data, size, "fuzz.gguf");
    // Touch the first and last byte of every tensor: ASan flags any view that the
    // validation let point outside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : f->tensors()) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      size_t n = t.nbytes();
      if (n) sink = sink + p[0] + p[n - 1];
    }
    const auto& m = f->metadata();
    (void)m.get_int("general.alignment", 0);
    (void)m.get_string("general.architecture", "");
  } catch (const brisk::Error&) {
  }
  return 0;
}
