// cuBLAS, loaded on first use (dlopen) instead of linked: linked, its libraries' static
// initializers (libcublasLt's above all) cost every process that contains the CUDA backend
// ~0.35 s of CPU at startup, GPU or not: every `brisk` command and test binary on a CPU
// machine. Only the functions the backend calls are resolved.
#pragma once
#include <cublas_v2.h>

namespace brisk::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSgemm_v2) sgemm;
  // (cublasGemmEx is overloaded in C++: the library's own, with a cublasComputeType_t)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
};

// Loads libcublas.so.<the major version built against> on the first call; fails (an Error
// naming the library and dlerror's reason) when it cannot be loaded.
const CublasApi& cublas_api();

}  // namespace brisk::cuda
