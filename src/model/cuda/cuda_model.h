// The llama-family model on an NVIDIA GPU (CUDA, built for Hopper): the same Model
// interface and the same math as model/llama.cpp, with the weights uploaded once in their
// GGUF dtype (kernels/cuda/cuda_ops.h says how they are laid out) and the K/V kept on the
// GPU through a KV codec (--kv-type f16, int8, int4, int4r, nsn2 in kernels/kv_format.h's byte
// layouts; f32, the default, is stored as f16 there).
//
// The KvCache passed to forward() is used for its shape and bookkeeping only (capacity,
// lengths, check_write, set_length): the K/V themselves live in the model's own GPU cache,
// sized from the first KvCache it sees (re-allocated when a cache of another shape comes).
// The GPU holds the K/V of one KvCache at a time: a batch for a different KvCache object
// must start every sequence at position 0 (a fresh cache), else forward() throws. A later
// issue unifies this with the paged block cache.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "model/model.h"

namespace brisk {

enum class Device { Cpu, Cuda };

// "cpu" or "cuda"; throws brisk::Error otherwise.
Device parse_device(std::string_view name);

// True when brisk was built with CUDA (BRISK_CUDA) and a CUDA device is present.
bool cuda_available();
// Why not, when cuda_available() is false ("built without CUDA", the CUDA error, ...).
std::string cuda_unavailable_reason();

// The CUDA model of a llama-family source (throws brisk::Error when CUDA is unavailable or
// a tensor cannot be placed on the GPU).
std::unique_ptr<Model> make_cuda_model(ModelSource src);

// make_model or make_cuda_model.
std::unique_ptr<Model> make_model_on(ModelSource src, Device device);

// Statistics of a CUDA model for benchmarks: bytes of weights read by one decode step
// (every matrix once, plus one embedding row), and whether decode steps replay a CUDA graph.
struct CudaModelInfo {
  size_t weight_bytes_per_token = 0;
  size_t kv_bytes_per_position = 0;  // K and V of one position, all layers, as stored (--kv-type)
  size_t device_bytes = 0;           // weights uploaded
};
// nullptr when `m` is not a CUDA model.
const CudaModelInfo* cuda_model_info(const Model& m);

}  // namespace brisk
