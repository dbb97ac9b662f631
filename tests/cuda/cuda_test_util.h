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

}  // namespace brisk::test
#endif
