// Per-type row quantizers/dequantizers behind quant.h's dispatch (n is a multiple of the
// block size). Kept separate so each type's algorithm lives in its own file.
#pragma once
#include <cstdint>

namespace brisk::quant_detail {

void dequantize_q8_0(const void* src, float* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
void dequantize_q4_0(const void* src, float* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);

// Round half away from zero, as the quantizers use for levels.
inline int round_int(float x) { return static_cast<int>(x < 0 ? x - 0.5f : x + 0.5f); }

}  // namespace brisk::quant_detail
