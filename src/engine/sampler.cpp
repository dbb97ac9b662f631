#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace brisk {

void SamplingParams::validate(int64_t n_vocab) const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    fail("temperature must be a finite number >= 0, got {}", temperature);
  if (!(top_p > 0 && top_p <= 1)) fail("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0 && min_p <= 1)) fail("min_p must be in [0, 1], got {}", min_p);
  if (top_k < 0) fail("top_k must be >= 0 (0 = off), got {}", top_k);
  if (!(repeat_penalty > 0) || !std::isfinite(repeat_penalty))
    fail("repeat_penalty must be > 0, got {}", repeat_penalty);
  if (repeat_last_n < 0) fail("repeat_last_n must be >= 0, got {}", repeat_last_n);
  if (!(std::abs(frequency_penalty) <= 2)) fail("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!(std::abs(presence_penalty) <= 2)) fail("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  for (auto [id, bias] : logit_bias) {
    if (id < 0) fail("logit bias: token ids are >= 0, got {}", id);
    if (n_vocab > 0 && id >= n_vocab) fail("logit bias for token {}: not a token id of this model (0..{})", id, n_vocab - 1);
    if (!(std::abs(bias) <= 100)) fail("logit bias of token {} must be in [-100, 100], got {}", id, bias);
  }
}

Sampler::Sampler(const SamplingParams& params) : params_(params), state_(params.seed) {
  params_.validate();
}

int32_t argmax(std::span<const float> logits) {
  // In the widest lanes the CPU has (16,384 logits: 14.8 us one at a time, 8.6 in 16 scalar
  // lanes, 1.6 in four AVX-512 vectors; a speculative step takes eight argmaxes).
  return kernel_table().argmax(logits.data(), static_cast<int64_t>(logits.size()));
}

void Sampler::adjust_logits(std::span<float> logits, std::span<const int32_t> history) const {
  const SamplingParams& p = params_;
  for (auto [t, bias] : p.logit_bias)  // ids beyond a (draft) model's vocabulary: no logit
    if (size_t(t) < logits.size()) logits[t] += bias;
  if (p.repeat_penalty != 1.0f && p.repeat_last_n > 0) {
    // CTRL (Keskar et al., 2019): divide positive logits, multiply negative ones, once per
    // distinct token of the recent window.
    size_t from = history.size() > size_t(p.repeat_last_n) ? history.size() - p.repeat_last_n : 0;
    std::vector<int32_t> seen(history.begin() + from, history.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t t : seen) {
      if (t < 0 || size_t(t) >= logits.size()) continue;
      float& l = logits[t];
      l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int> count;
    for (int32_t t : history) ++count[t];
    for (auto [t, c] : count) {
      if (t < 0 || size_t(t) >= logits.size()) continue;
      logits[t] -= c * p.frequency_penalty + p.presence_penalty;
    }
  }
}

std::vector<TokenProb> Sampler::candidates(std::span<float> logits,
                                           std::span<const int32_t> history) {
  adjust_logits(logits, history);
  const SamplingParams& p = params_;
  if (p.temperature <= 0) return {{argmax(logits), 1.0f}};

  // Candidate ids, largest logit first (ties by id, so the order is total). Only as much of
  // the order is built as a filter needs: top-k selects k, and top-p / min-p sort a growing
  // prefix until they cut. Sorting the whole vocabulary for every token cost milliseconds.
  const size_t n = logits.size();
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  const size_t k = p.top_k > 0 ? std::min<size_t>(p.top_k, n) : n;
  size_t sorted = 0;  // ids[0, sorted) hold the largest logits in order
  auto sort_prefix = [&](size_t m) {
    m = std::min(m, k);
    if (m <= sorted) return;
    if (m < n) std::nth_element(ids.begin() + sorted, ids.begin() + m, ids.end(), by_logit);
    std::sort(ids.begin() + sorted, ids.begin() + m, by_logit);
    sorted = m;
  };
  if (k < n) sort_prefix(k);

  // Softmax with temperature over the k survivors, in double for stable sums.
  float mx = logits[ids[0]];
  for (size_t i = 0; i < k; ++i) mx = std::max(mx, logits[ids[i]]);
  const float inv_t = 1.0f / p.temperature;
  std::vector<float> weight(n);  // by id; exp in float (the largest is 1), sums in double
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += weight[ids[i]] = std::exp((logits[ids[i]] - mx) * inv_t);
  auto prob_of = [&](int32_t id) { return weight[id] / sum; };

  if (p.top_p >= 1 && p.min_p <= 0) {
    // No filter cuts below top-k: the survivors in the order they are in (sorted with top-k,
    // id order without); the draw's distribution does not depend on the order.
    std::vector<TokenProb> out(k);
    for (size_t i = 0; i < k; ++i) out[i] = {ids[i], static_cast<float>(prob_of(ids[i]))};
    return out;
  }
  // top-p: the smallest prefix whose mass reaches top_p. min-p: p >= min_p * p_max.
  std::vector<double> prob;
  const double p_max = 1.0 / sum;
  double cum = 0;
  bool cut = false;
  for (size_t m = 64; !cut; m *= 4) {
    sort_prefix(m);
    for (size_t i = prob.size(); i < sorted && !cut; ++i) {
      double q = prob_of(ids[i]);
      if (p.min_p > 0 && q < p.min_p * p_max) {
        cut = true;
        break;
      }
      prob.push_back(q);
      cum += q;
      cut = p.top_p < 1 && cum >= p.top_p;
    }
    if (sorted == k) break;
  }
  const size_t keep = prob.size();
  double kept = 0;
  for (double q : prob) kept += q;
  std::vector<TokenProb> out(keep);
  for (size_t i = 0; i < keep; ++i) out[i] = {ids[i], static_cast<float>(prob[i] / kept)};
  return out;
}

double Sampler::next_uniform() {
  // splitmix64 (Steele et al., 2014): tiny, portable, good enough for sampling.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  std::vector<TokenProb> c = candidates(logits, history);
  if (c.size() == 1) return c[0].id;
  return draw(c, next_uniform());
}

int32_t draw(std::span<const TokenProb> dist, double u) {
  double cum = 0;
  for (const TokenProb& t : dist) {
    cum += t.p;
    if (u < cum) return t.id;
  }
  return dist.back().id;
}

}  // namespace brisk
