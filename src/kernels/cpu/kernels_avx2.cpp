#include "kernels/dispatch.h"
namespace brisk {
void fill_avx2_kernels(KernelTable&) {}
}  // namespace brisk
