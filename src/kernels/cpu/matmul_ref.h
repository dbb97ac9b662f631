// Plain reference implementations the optimized kernels are tested against.
#pragma once
#include <cstdint>

#include "tensor/tensor_view.h"

namespace brisk {

// matmul by dequantizing each weight row with tensor/quant and accumulating in double.
void matmul_ref(const TensorView& W, const float* x, int64_t n_tokens, float* y);

// The definition of the 8-bit-activation matmul of packed weights (dispatch.h: QuantizeActFn,
// PackedDotFn):
// each token's activations quantized per block of 32 (d = max|x| / 127, q = nearbyint(x / d)
// computed as x * (1 / d)), then y = sum over blocks of d_w * d_x * (integer dot), in double.
void quantize_act_ref(const float* x, int64_t k, int8_t* qs, float* d);
void matmul_q8_ref(const TensorView& W, const float* x, int64_t n_tokens, float* y);

}  // namespace brisk
