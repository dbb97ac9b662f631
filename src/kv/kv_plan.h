// A per-layer KV plan (`--kv-evict plan:FILE`, made by `brisk calibrate`): every layer gets
// its own codec and its own share of positions kept, after MoE-nD (Sun et al., "MoE-nD:
// Per-Layer Mixture-of-Experts Routing for Multi-Axis KV Cache Compression", arXiv
// 2604.17695), which routes each layer to its own (eviction ratio, K bits, V bits) under
// one global memory budget. One token-eviction policy (kv/token_eviction.h) picks the kept
// positions of every layer whose share is below 1.
//
// File format (text; '#' starts a comment, blank lines are ignored):
//   policy snapkv          streaming | h2o | snapkv | tova
//   layers 8               the model's layer count
//   layer 0 int8 0.5       layer index, KV type (kernels/kv_format.h), kept share in (0, 1]
//   ...                    one line per layer, each layer exactly once
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kv_format.h"

namespace brisk {

struct KvLayerOption {
  KvType type = KvType::f32;
  double keep = 1;  // share of the sequence's positions the layer keeps, (0, 1]
  bool operator==(const KvLayerOption&) const = default;
};

struct KvPlan {
  std::string policy = "snapkv";
  std::vector<KvLayerOption> layers;
  bool operator==(const KvPlan&) const = default;
};

// Throws brisk::Error naming `where` (the file), the line and what is wrong.
KvPlan parse_kv_plan(const std::string& text, const std::string& where);
KvPlan read_kv_plan(const std::string& path);
// The file text; `comment` (may hold several lines) goes first, each line behind '#'.
// Keeps are written with enough digits to read back exactly.
std::string format_kv_plan(const KvPlan& plan, const std::string& comment = "");

// KV memory of one layer under `o` as a share of that layer's full f16 cache:
// keep * bytes(type) / bytes(f16) per head vector.
double kv_option_cost(const KvLayerOption& o, int64_t head_dim);
// The plan's KV memory as a share of the whole model's full f16 cache (mean over layers).
double kv_plan_cost(const KvPlan& plan, int64_t head_dim);

}  // namespace brisk
