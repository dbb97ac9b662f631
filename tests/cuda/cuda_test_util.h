// Device buffers for the GPU tests (built with BRISK_CUDA only). The buffers are not freed:
// each test process is short and compute-sanitizer checks accesses, not leaks.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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
