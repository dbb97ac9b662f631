// libFuzzer target: any byte string given to the GGUF parser must end in a parsed file
// or a brisk::Error, never a crash, an out-of-bounds read or a runaway allocation.
#include <cstddef>
#include <cstdint>

#include "format/gguf.h"
#include "touch_tensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = brisk::GgufFile::parse(data, size, "fuzz.gguf");
    fuzz::touch_tensors(f->tensors());
    const auto& m = f->metadata();
    (void)m.get_int("general.alignment", 0);
    (void)m.get_string("general.architecture", "");
  } catch (const brisk::Error&) {
  }
  return 0;
}
