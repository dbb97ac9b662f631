#include "kernels/cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "util/error.h"

namespace brisk::cuda {

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    const std::string lib = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) fail("cannot load cuBLAS ({}): {}", lib, dlerror());
    const auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p) fail("{} has no {}: {}", lib, name, dlerror());
      return p;
    };
    CublasApi a;
    a.create = reinterpret_cast<decltype(a.create)>(sym("cublasCreate_v2"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(sym("cublasDestroy_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(sym("cublasSetStream_v2"));
    a.sgemm = reinterpret_cast<decltype(a.sgemm)>(sym("cublasSgemm_v2"));
    a.gemm_ex = reinterpret_cast<decltype(a.gemm_ex)>(sym("cublasGemmEx"));
    return a;  // the library stays loaded for the process
  }();
  return api;
}

}  // namespace brisk::cuda
