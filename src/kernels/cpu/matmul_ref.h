// Plain reference implementations the optimized kernels are tested against.
#pragma once
#include <cstdint>

#include "tensor/tensor_view.h"

namespace brisk {

// matmul by dequantizing each weight row with tensor/quant and accumulating in double.
void matmul_ref(const TensorView& W, const float* x, int64_t n_tokens, float* y);

}  // namespace brisk
