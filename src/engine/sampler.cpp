#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "engine/softmax_weights.h"
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
    // Counts in an array by token id, left at zero for the next call: the whole history is
    // counted for every token, and a hash map of it cost ~30 ns a history token.
    thread_local std::vector<int32_t> count;
    if (count.size() < logits.size()) count.resize(logits.size());
    for (int32_t t : history)
      if (t >= 0 && size_t(t) < logits.size()) ++count[size_t(t)];
    for (int32_t t : history) {
      if (t < 0 || size_t(t) >= logits.size() || count[size_t(t)] == 0) continue;
      logits[t] -= count[size_t(t)] * p.frequency_penalty + p.presence_penalty;  // once a distinct token
      count[size_t(t)] = 0;
    }
  }
}

namespace {
// One thread's scratch for sampling, kept from token to token: fresh vectors of the
// vocabulary's size for every token cost as much in page faults as the arithmetic.
struct Scratch {
  std::vector<float> w;        // softmax weights exp((l - max) / T), the largest 1
  std::vector<int32_t> ids;
  std::vector<uint16_t> bucket;  // top-p: each weight's bucket_of
  std::vector<TokenProb> dist;  // sample()'s candidates
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Top-p over the whole vocabulary without sorting it: weights in (0, 1] fall into buckets by
// their binary exponent and two leading mantissa bits (largest first; 4 buckets an octave,
// so a bucket's weights are within 1.25x of each other), whose masses find the bucket
// where the mass reaches top_p; only that bucket's tokens are sorted.
// A NaN weight (from NaN or infinite logits) goes to the first bucket rather than outside.
constexpr int kBuckets = 512;
inline int bucket_of(float w) {
  const uint32_t key = std::bit_cast<uint32_t>(w) >> 21;  // 508 for 1.0, smaller below
  return kBuckets - 1 - static_cast<int>(std::min<uint32_t>(key, kBuckets - 1));  // no branch
}
// The first i at which the running sum at(0) + ... + at(i) passes `target` (n - 1 when
// rounding leaves it beyond the total). Whole blocks of 16 first (their sums in four
// chains), then one by one inside the block where the sum passes: a single running sum
// over a 16,384-token vocabulary waited on every add.
template <class F>
size_t first_past(size_t n, F&& at, double target) {
  double cum = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    double a[4] = {};
    for (size_t j = 0; j < 16; ++j) a[j % 4] += at(i + j);
    const double block = (a[0] + a[1]) + (a[2] + a[3]);
    if (target < cum + block) break;
    cum += block;
  }
  for (; i < n; ++i)
    if (target < (cum += at(i))) return i;
  return n - 1;
}
}  // namespace

std::vector<TokenProb> Sampler::candidates(std::span<float> logits,
                                           std::span<const int32_t> history) {
  std::vector<TokenProb> out;
  double sum = 0;
  if (candidates_into(logits, history, true, out, &sum)) {  // every token, in id order
    const std::vector<float>& w = scratch().w;
    const double inv = 1.0 / sum;  // a division an element cost more than the exponentials
    out.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = {static_cast<int32_t>(i), static_cast<float>(w[i] * inv)};
  }
  return out;
}

bool Sampler::candidates_into(std::span<float> logits, std::span<const int32_t> history,
                              bool ordered, std::vector<TokenProb>& out, double* whole_sum) {
  adjust_logits(logits, history);
  const SamplingParams& p = params_;
  if (p.temperature <= 0) {
    out.assign(1, {argmax(logits), 1.0f});
    return false;
  }
  const size_t n = logits.size();
  const size_t k = p.top_k > 0 ? std::min<size_t>(p.top_k, n) : n;
  Scratch& s = scratch();
  // A broken model's NaN logits become -inf (never drawn), so that the order below is a
  // strict total one (std::sort comparing NaNs may run past its range).
  for (float& x : logits) x = x == x ? x : -HUGE_VALF;
  auto by_logit = [&](int32_t a, int32_t b) {  // largest logit first, ties by id
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  // An infinite logit leaves no finite softmax: the largest logit's token then.
  auto degenerate = [](double sum) { return !(sum > 0 && sum <= HUGE_VAL); };

  if (k < n) {
    // top-k: the k largest in order, softmax over them, then top-p and min-p along that order.
    s.ids.resize(n);
    for (size_t i = 0; i < n; ++i) s.ids[i] = static_cast<int32_t>(i);
    std::nth_element(s.ids.begin(), s.ids.begin() + k, s.ids.end(), by_logit);
    std::sort(s.ids.begin(), s.ids.begin() + k, by_logit);
    s.w.resize(k);
    for (size_t i = 0; i < k; ++i) s.w[i] = logits[s.ids[i]];
    const double sum = softmax_weights(s.w, s.w[0], p.temperature, s.w);  // in place
    if (degenerate(sum)) {
      out.assign(1, {s.ids[0], 1.0f});
      return false;
    }
    double cum = 0;
    size_t keep = 0;
    // min-p: p >= min_p * p_max, and the largest weight is exp(0) = 1.
    while (keep < k && (keep == 0 || s.w[keep] >= p.min_p) && !(p.top_p < 1 && cum >= p.top_p * sum))
      cum += s.w[keep++];
    const double kept = sum_in_chains(keep, [&](size_t i) { return s.w[i]; });
    out.clear();
    for (size_t i = 0; i < keep; ++i) out.push_back({s.ids[i], static_cast<float>(s.w[i] / kept)});
    return false;
  }

  const int32_t top = argmax(logits);
  const double sum = softmax_weights(logits, logits[static_cast<size_t>(top)], p.temperature, s.w);
  const float* w = s.w.data();
  if (degenerate(sum)) {
    out.assign(1, {top, 1.0f});
    return false;
  }
  if (p.top_p >= 1 && p.min_p <= 0) {  // no filter: every token, the weights as they are
    *whole_sum = sum;
    return true;
  }
  // top-p: the smallest prefix of the order whose mass reaches top_p; it ends at `last` of
  // bucket `edge` (every bucket before it is kept whole).
  int edge = kBuckets;
  int32_t last = -1;
  const uint16_t* bucket = nullptr;  // set with top-p (without it, every bucket is kept)
  if (p.top_p < 1) {
    s.bucket.resize(n);
    for (size_t i = 0; i < n; ++i) s.bucket[i] = static_cast<uint16_t>(bucket_of(w[i]));
    bucket = s.bucket.data();
    // Four histograms side by side: neighbouring tokens often share a bucket, and one
    // histogram would wait on each add's store before the next.
    std::array<std::array<double, kBuckets>, 4> part{};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (size_t j = 0; j < 4; ++j) part[j][bucket[i + j]] += w[i + j];
    for (; i < n; ++i) part[0][bucket[i]] += w[i];
    std::array<double, kBuckets> mass;
    for (size_t b = 0; b < kBuckets; ++b) mass[b] = (part[0][b] + part[1][b]) + (part[2][b] + part[3][b]);
    const double target = p.top_p * sum;
    double cum = 0;
    int b = 0;
    for (; b < kBuckets && cum + mass[static_cast<size_t>(b)] < target; ++b) cum += mass[static_cast<size_t>(b)];
    if (b < kBuckets) {
      s.ids.clear();
      for (size_t i = 0; i < n; ++i)
        if (bucket[i] == b) s.ids.push_back(static_cast<int32_t>(i));
      std::sort(s.ids.begin(), s.ids.end(), by_logit);
      for (int32_t id : s.ids) {
        last = id;
        if ((cum += w[id]) >= target) break;
      }
      edge = b;
    }
  }
  out.clear();
  for (size_t i = 0; i < n; ++i) {
    const int b = bucket ? bucket[i] : 0;
    const bool in_top_p = b < edge || (b == edge && !by_logit(last, static_cast<int32_t>(i)));
    if (in_top_p && w[i] >= p.min_p) out.push_back({static_cast<int32_t>(i), w[i]});
  }
  const double inv = 1.0 / sum_in_chains(out.size(), [&](size_t i) { return out[i].p; });
  for (TokenProb& t : out) t.p = static_cast<float>(t.p * inv);
  if (ordered) std::sort(out.begin(), out.end(), [&](const TokenProb& a, const TokenProb& b) { return by_logit(a.id, b.id); });
  return false;
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
  std::vector<TokenProb>& c = scratch().dist;
  double sum = 0;
  if (candidates_into(logits, history, false, c, &sum)) {  // from the weights, in id order
    const std::vector<float>& w = scratch().w;
    return static_cast<int32_t>(first_past(w.size(), [&](size_t i) { return w[i]; }, next_uniform() * sum));
  }
  if (c.size() == 1) return c[0].id;
  return draw(c, next_uniform());  // the same set as candidates(), drawn in id order
}

int32_t draw(std::span<const TokenProb> dist, double u) {
  return dist[first_past(dist.size(), [&](size_t i) { return dist[i].p; }, u)].id;
}

}  // namespace brisk
