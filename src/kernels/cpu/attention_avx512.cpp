// The attention task body (attention_task.inc) compiled for AVX512; chosen at run time
// by attention.cpp when active_isa() allows it.
#include <cstdint>

#include "kernels/attention.h"
#include "tensor/quant.h"

// clang ignores GCC target pragmas; it has its own form of the same thing.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

namespace brisk::attention_avx512 {
#define BRISK_ATTN_LANES 16
#include "attention_task.inc"
#undef BRISK_ATTN_LANES
}  // namespace brisk::attention_avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
