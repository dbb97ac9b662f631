#include "tensor/quant.h"

#include <cstring>

#include "tensor/quant_types.h"
#include "util/error.h"

namespace brisk {

using namespace quant_detail;

static void check_len(DType t, int64_t n) {
  const DTypeInfo& i = info(t);
  if (!i.supported) fail("dtype {} is not supported for (de)quantization", i.name);
  if (n < 0 || n % i.block_elems != 0)
    fail("row of {} elements is not a multiple of the {} block size {}", n, i.name,
         i.block_elems);
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_len(t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case DType::Q8_0: return dequantize_q8_0(src, dst, n);
    case DType::Q4_0: return dequantize_q4_0(src, dst, n);
    case DType::Q4_K: return dequantize_q4_k(src, dst, n);
    case DType::Q6_K: return dequantize_q6_k(src, dst, n);
    default: fail("dequantize_row: unsupported dtype {}", dtype_name(t));
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_len(t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::Q8_0: return quantize_q8_0(src, dst, n);
    case DType::Q4_0: return quantize_q4_0(src, dst, n);
    case DType::Q4_K: return quantize_q4_k(src, dst, n);
    case DType::Q6_K: return quantize_q6_k(src, dst, n);
    default: fail("quantize_row: unsupported dtype {}", dtype_name(t));
  }
}

}  // namespace brisk
