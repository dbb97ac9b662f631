# BRISK_CUDA: the CUDA backend (src/kernels/cuda/*.cu -> brisk_cuda; src/model/cuda is part
# of brisk_model and compiles to a stub without it). On by default when nvcc is found;
# built for Hopper only: sm_90a machine code plus compute_90 PTX.
include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
set(_brisk_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  set(_brisk_cuda_default ON)
endif()
option(BRISK_CUDA "Build the CUDA backend (--device cuda)" ${_brisk_cuda_default})

if(BRISK_CUDA)
  set(CMAKE_CUDA_ARCHITECTURES OFF)  # the -gencode flags below say it
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  file(GLOB brisk_cuda_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/cuda/*.cu)
  add_library(brisk_cuda STATIC ${brisk_cuda_srcs})
  # The directory's GCC warning flags are not nvcc flags: replace them.
  set_property(TARGET brisk_cuda PROPERTY COMPILE_OPTIONS "")
  target_compile_options(brisk_cuda PRIVATE
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90
    -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
  # CMake 3.25 knows no C++20 flag for nvcc 13 (and CUDA_STANDARD follows CXX_STANDARD
  # otherwise): the .cu files are C++17.
  set_target_properties(brisk_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_include_directories(brisk_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
  # cuBLAS is not linked: kernels/cuda/cublas_api.h loads it on first use.
  target_link_libraries(brisk_cuda PUBLIC brisk_kernels brisk_tensor CUDA::cudart ${CMAKE_DL_LIBS})
  target_link_libraries(brisk_model PUBLIC brisk_cuda)
  target_compile_definitions(brisk_model PUBLIC BRISK_CUDA=1)

  # GPU benchmark driver (bench/gpu/run.sh runs it on the device machine).
  add_executable(bench_gpu ${CMAKE_SOURCE_DIR}/bench/gpu/bench_gpu.cpp)
  target_link_libraries(bench_gpu PRIVATE brisk_eval CUDA::cudart CUDA::cublas)  # (calls cuBLAS itself)
endif()
