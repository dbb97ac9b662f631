// libFuzzer target: any byte string given to the safetensors parser must end in a parsed
// file or a brisk::Error, never a crash, an out-of-bounds read or a runaway allocation.
#include <cstddef>
#include <cstdint>

#include "format/safetensors.h"
#include "touch_tensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = brisk::SafetensorsFile::parse(data, size, "fuzz.safetensors");
    fuzz::touch_tensors(f->tensors());
    for (const auto& t : f->tensors())
      if (f->find(t.name) == nullptr) __builtin_trap();  // every tensor can be found by name
  } catch (const brisk::Error&) {
  }
  return 0;
}
