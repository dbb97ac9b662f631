#include "kv/token_eviction.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kv/kv_cache.h"
#include "kv/kv_codec.h"
#include "util/error.h"

namespace brisk {

int64_t TokenBudget::of(int64_t length) const {
  if (tokens > 0) return tokens;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(fraction * static_cast<double>(length))));
}

EvictionSpec parse_eviction(const std::string& spec) {
  EvictionSpec e;
  if (spec == "none" || spec.empty()) return e;
  if (spec == "refree") {
    e.policy = spec;
    return e;
  }
  if (spec.rfind("plan:", 0) == 0) {
    e.policy = "plan";
    e.plan_file = spec.substr(5);
    if (e.plan_file.empty())
      fail("--kv-evict '{}': missing the plan file (plan:FILE, made by brisk calibrate)", spec);
    return e;
  }
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (name != "streaming" && name != "h2o" && name != "snapkv" && name != "tova")
    fail("unknown --kv-evict '{}' (expected none, refree, streaming:B, h2o:B, snapkv:B, tova:B "
         "or plan:FILE, B a fraction in (0, 1] or a token count)", spec);
  if (colon == std::string::npos) fail("--kv-evict '{}': missing the budget (e.g. {}:0.25)", spec, name);
  const std::string b = spec.substr(colon + 1);
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(b, &used);
    if (used != b.size()) throw std::invalid_argument(b);
  } catch (const std::exception&) {
    fail("--kv-evict '{}': budget '{}' is not a number", spec, b);
  }
  e.policy = name;
  if (v > 0 && v <= 1) {
    e.budget.fraction = v;
  } else if (v > 1 && v == std::floor(v)) {
    e.budget.tokens = static_cast<int64_t>(v);
  } else {
    fail("--kv-evict '{}': budget {} must be a fraction in (0, 1] or a whole token count", spec, b);
  }
  return e;
}

std::unique_ptr<TokenEvictionPolicy> make_token_eviction(const EvictionSpec& spec, int64_t n_layer,
                                                         int64_t n_seq, int64_t n_head_kv) {
  if (spec.policy == "streaming") return eviction::streaming();
  if (spec.policy == "h2o") return eviction::h2o(n_layer, n_seq, n_head_kv);
  if (spec.policy == "snapkv") return eviction::snapkv();
  if (spec.policy == "tova") return eviction::tova();
  if (spec.policy == "refree") return eviction::refree();
  return nullptr;
}

void eviction_weights(const EvictionInput& in, int64_t g, std::vector<float>& w) {
  const KvCacheShape& s = in.cache.shape();
  const int64_t d = s.head_dim, group = in.n_head / s.n_head_kv, n = in.n_slots;
  std::vector<float> k(static_cast<size_t>(n * d)), row(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) in.cache.decode_k(in.layer, in.seq, p, g, k.data() + p * d);
  w.assign(static_cast<size_t>(in.n_q * n), 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t i = 0; i < in.n_q; ++i) {
    const int64_t visible = std::min(n, in.first_slot + i + 1);
    for (int64_t r = 0; r < group; ++r) {
      const float* q = in.q + (i * in.n_head + g * group + r) * d;
      float mx = -INFINITY;
      for (int64_t p = 0; p < visible; ++p) {
        float dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[e] * k[p * d + e];
        row[p] = dot * scale;
        mx = std::max(mx, row[p]);
      }
      double sum = 0;
      for (int64_t p = 0; p < visible; ++p) sum += (row[p] = std::exp(row[p] - mx));
      for (int64_t p = 0; p < visible; ++p) w[i * n + p] += static_cast<float>(row[p] / sum);
    }
  }
}

std::vector<int64_t> top_slots_plus_tail(const std::vector<float>& score, int64_t lo, int64_t hi,
                                         int64_t n, int64_t n_slots) {
  std::vector<int64_t> idx(static_cast<size_t>(hi - lo));
  std::iota(idx.begin(), idx.end(), lo);
  n = std::min<int64_t>(n, hi - lo);
  // ties: the later slot wins (more recent)
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int64_t a, int64_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a > b;
  });
  idx.resize(static_cast<size_t>(n));
  for (int64_t p = hi; p < n_slots; ++p) idx.push_back(p);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace brisk
