// Shared by the GPU tests: skipping where there is no GPU, and (built with BRISK_CUDA) device
// buffers. The buffers are not freed: each test process is short and compute-sanitizer
// checks accesses, not leaks.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "model/cuda/cuda_model.h"

// In a test body: skip (not fail) where the machine has no usable GPU (CI compiles only).
#define SKIP_WITHOUT_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason()

#if defined(BRISK_CUDA)
#include <cuda_runtime_api.h>

#include <random>

#include "kernels/cuda/cuda_ops.h"
#include "tensor/quant.h"

namespace brisk::test {

template <class T>
T* dev_alloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, sizeof(T) * std::max<size_t>(n, 1)), cudaSuccess);
  return static_cast<T*>(p);
}
template <class T>
T* to_device(const std::vector<T>& v) {
  T* p = dev_alloc<T>(v.size());
  EXPECT_EQ(cudaMemcpy(p, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}
template <class T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(v.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}


// A matrix of N(0, 0.05) weights, quantized on the host to `type`, uploaded.
inline cuda::DevMatrix random_device_matrix(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 0.05f);
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> bytes(rb * rows);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    quantize_row(type, row.data(), bytes.data() + r * rb, cols);
  }
  TensorView tv;
  tv.name = "w";
  tv.type = type;
  tv.n_dims = 2;
  tv.ne = {cols, rows, 1, 1};
  tv.data = bytes.data();
  return cuda::upload_matrix(tv);
}

}  // namespace brisk::test
#endif
