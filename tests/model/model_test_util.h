// Shared helpers of the model tests: fixture paths, reference files, loaded models.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "model/model.h"

namespace brisk::test {

inline std::string source_dir() { return BRISK_SOURCE_DIR; }
inline std::string nano_dir() { return source_dir() + "/tests/fixtures/brisk-nano"; }
// Shared assets live next to the checkout; a fresh clone may not have them.
inline std::string shared_models() { return source_dir() + "/../shared/models"; }

inline bool exists(const std::string& p) { return std::filesystem::exists(p); }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(f);
}

// Models are loaded once per test binary: loading is cheap (mmap) but not free.
inline Model& cached_model(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[path];
  if (!m) m = load_model(path);
  return *m;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& a) { return a.get<std::vector<int32_t>>(); }

inline int32_t argmax(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// Ids of the k largest values, largest first (ties: lower id first).
inline std::vector<int32_t> top_k(const float* x, int64_t n, int k) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

inline double log_sum_exp(const float* x, int64_t n) {
  const double m = *std::max_element(x, x + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// Logits of the last token of `ids`, run as one batch in a fresh single-sequence cache.
inline std::vector<float> last_logits(Model& m, const std::vector<int32_t>& ids) {
  KvCache cache(m.cache_shape(1, static_cast<int64_t>(ids.size())));
  Batch b;
  b.add_sequence(ids, 0, 0);
  std::vector<float> logits;
  m.forward(b, cache, logits);
  return logits;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace brisk::test
