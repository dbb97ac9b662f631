// Conversion between float32 and every supported storage type, one row at a time.
// These are the plain reference implementations; optimized kernels live in kernels/.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace brisk {

// n must be a multiple of info(t).block_elems. Throws brisk::Error for unsupported types.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Scalar half/bfloat16 conversions (round to nearest even).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace brisk
