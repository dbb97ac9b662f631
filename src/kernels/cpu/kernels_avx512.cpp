#include "kernels/dispatch.h"
namespace brisk {
void fill_avx512_kernels(KernelTable&) {}
}  // namespace brisk
