// The threaded CPU attention kernel against the plain definition, and the plain definition
// against hand-computable cases.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

// K/V of one sequence stored in blocks of `block_size` positions, as a paged cache would.
struct BlockedKv {
  std::vector<std::vector<float>> k, v;
  std::vector<const float*> kp, vp;
  KvSeqView view;

  BlockedKv(int64_t n_pos, int64_t block_size, int64_t row, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (int64_t b = 0; b * block_size < n_pos; ++b) {
      k.emplace_back(block_size * row);
      v.emplace_back(block_size * row);
      for (auto& x : k.back()) x = d(rng);
      for (auto& x : v.back()) x = d(rng);
    }
    for (size_t b = 0; b < k.size(); ++b) {
      kp.push_back(k[b].data());
      vp.push_back(v[b].data());
    }
    view = KvSeqView{kp.data(), vp.data(), block_size, row};
  }
};

TEST(Attention, SinglePositionReturnsItsValue) {
  // With one position the softmax weight is 1 whatever the scores: out = V[0].
  const AttentionShape s{4, 2, 8, 0.35f};
  std::mt19937 rng(1);
  BlockedKv kv(1, 1, s.n_head_kv * s.head_dim, rng);
  std::vector<float> q(s.n_head * s.head_dim, 3.0f), out(q.size());
  const int32_t pos = 0;
  const KvSeqView* v = &kv.view;
  attention_ref(q.data(), 1, &pos, &v, s, out.data());
  for (int64_t h = 0; h < s.n_head; ++h)
    for (int64_t i = 0; i < s.head_dim; ++i)
      EXPECT_EQ(out[h * s.head_dim + i], kv.v[0][(h / 2) * s.head_dim + i]);
}

TEST(Attention, TwoPositionsByHand) {
  // head_dim 1, one head: scores q*k*scale = {1*2*0.5, 1*(-2)*0.5} = {1, -1};
  // weights e/(e+1/e), 1/e/(e+1/e); values {10, 20}.
  const AttentionShape s{1, 1, 1, 0.5f};
  std::vector<float> k{2, -2}, v{10, 20};
  const float* kp = k.data();
  const float* vp = v.data();
  const KvSeqView view{&kp, &vp, 2, 1};
  const KvSeqView* views = &view;
  const float q = 1;
  const int32_t pos = 1;
  float out = 0;
  attention_ref(&q, 1, &pos, &views, s, &out);
  const double w0 = std::exp(1.0) / (std::exp(1.0) + std::exp(-1.0));
  EXPECT_NEAR(out, 10 * w0 + 20 * (1 - w0), 1e-5);
  attention(&q, 1, &pos, &views, s, &out);
  EXPECT_NEAR(out, 10 * w0 + 20 * (1 - w0), 1e-5);
}

// Many tokens of two sequences (blocked storage, ragged positions), GQA groups of 1 to 8
// (on AVX-512, head_dim-64 groups run in tiles of up to 4 heads: 3, 4 and 5 = 4+1 appear)
// and head sizes (64: the register path; 128: two slices of it; 24 and 40: the generic
// path), every instruction set this CPU has, 1 to 5 threads: kernel == reference. The
// query scale `sharp` makes some softmaxes nearly one-hot (scores spread over tens),
// which exercises the exp clamp for very negative arguments.
TEST(Attention, MatchesReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const Isa isa_before = active_isa();
  for (AttentionShape s : {AttentionShape{6, 2, 64, 0.125f}, AttentionShape{4, 4, 24, 0.2f},
                           AttentionShape{8, 1, 40, 0.15f}, AttentionShape{4, 1, 128, 0.09f},
                           AttentionShape{8, 2, 64, 0.125f}, AttentionShape{10, 2, 64, 0.125f}}) {
    for (float sharp : {2.0f, 40.0f}) {
      const int64_t row = s.n_head_kv * s.head_dim;
      BlockedKv a(300, 16, row, rng), b(90, 7, row, rng);
      // tokens: a's positions 200..299, b's 0..89 interleaved every 3rd (short runs) ...
      std::vector<int32_t> pos;
      std::vector<const KvSeqView*> views;
      for (int32_t p = 200, pb = 0; p < 300 || pb < 90; ++p) {
        if (p < 300) { pos.push_back(p); views.push_back(&a.view); }
        if (p % 3 == 0 && pb < 90) { pos.push_back(pb++); views.push_back(&b.view); }
      }
      // ... then a prefill chunk of a: positions 0..150 in a row (tiles of many tokens,
      // crossing block boundaries and the 64-position chunks)
      for (int32_t p = 0; p <= 150; ++p) { pos.push_back(p); views.push_back(&a.view); }
      const int64_t T = static_cast<int64_t>(pos.size());
      std::vector<float> q(T * s.n_head * s.head_dim), want(q.size()), got(q.size());
      for (auto& x : q) x = sharp * d(rng);
      attention_ref(q.data(), T, pos.data(), views.data(), s, want.data());
      for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
        if (isa > best_isa()) continue;
        set_isa(isa);
        for (int threads : {1, 2, 5}) {
          ThreadPool::set_global_threads(threads);
          attention(q.data(), T, pos.data(), views.data(), s, got.data());
          float worst = 0;
          for (size_t i = 0; i < q.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
          // A score s carries float32 rounding of about |s| * 1e-7 that depends on the
          // summation order (lanes, FMA); exp turns it into a relative weight error of the
          // same size. Scores here reach ~3 (sharp 2) and ~60 (sharp 40).
          const float tol = sharp < 10 ? 1e-5f : 2e-4f;
          EXPECT_LE(worst, tol) << isa_name(isa) << " threads " << threads << " head_dim "
                                  << s.head_dim << " group " << s.n_head / s.n_head_kv
                                  << " sharp " << sharp;
        }
      }
    }
  }
  set_isa(isa_before);
  ThreadPool::set_global_threads(0);
}

// The same K/V stored in blocks of 16 (the serving engine) or in one block (Generator,
// perplexity): the same bits out, on every ISA, for decode tokens and prefill tiles, at head
// dims 64 and 128 (dot16's compile-time paths) and 48 (its run-time one). Blocks of 3 and 5
// cut the scores into pieces too short for dot16 (dot4 and dot then score every position),
// so these also pin the three dot products to one summation order.
TEST(Attention, BlockSizeDoesNotChangeTheBits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const Isa isa_before = active_isa();
  for (int64_t head_dim : {64, 128, 48}) {
    const AttentionShape s{8, 2, head_dim, 0.125f};
    const int64_t row = s.n_head_kv * s.head_dim, n_pos = 200;
    BlockedKv whole(n_pos, n_pos, row, rng);
    std::vector<int32_t> pos;
    for (int32_t p = 0; p < 150; ++p) pos.push_back(p);       // a prefill chunk
    for (int32_t p : {150, 170, 199}) pos.push_back(p);        // decode tokens
    const int64_t T = static_cast<int64_t>(pos.size());
    std::vector<float> q(T * s.n_head * s.head_dim), a(q.size()), b(q.size());
    for (auto& x : q) x = 3 * d(rng);
    std::vector<const KvSeqView*> va(T, &whole.view);
    for (int64_t bs : {16, 3, 5}) {
      BlockedKv paged(n_pos, bs, row, rng);
      for (int64_t p = 0; p < n_pos; ++p)  // the same rows, laid out in bs-position blocks
        for (int64_t i = 0; i < row; ++i) {
          paged.k[p / bs][(p % bs) * row + i] = whole.k[0][p * row + i];
          paged.v[p / bs][(p % bs) * row + i] = whole.v[0][p * row + i];
        }
      std::vector<const KvSeqView*> vb(T, &paged.view);
      for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
        if (isa > best_isa()) continue;
        set_isa(isa);
        attention(q.data(), T, pos.data(), va.data(), s, a.data());
        attention(q.data(), T, pos.data(), vb.data(), s, b.data());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
            << isa_name(isa) << ", head dim " << head_dim << ", blocks of " << bs;
      }
    }
  }
  set_isa(isa_before);
}

// Past 1,024 positions the softmax runs in segments merged in order; a lone decode token
// splits its segments across threads (flash-decoding). On every ISA and thread count:
// kernel == reference, and a decode token's output has the same bits as the same token
// computed inside a prefill tile (one task running all segments), in blocks of 16 or one.
TEST(Attention, LongContextSplitsAndTilesAgreeBitForBit) {
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const Isa isa_before = active_isa();
  const AttentionShape s{6, 2, 64, 0.125f};
  const int64_t row = s.n_head_kv * s.head_dim, n_pos = 2600;  // 3 segments, the last partial
  BlockedKv kv(n_pos, 16, row, rng);
  // Decode tokens at 1023 (one segment), 1024 and 2599 (split), then a prefill tile
  // 2590..2599 (its rows see 1 to 10 positions of the last segment).
  std::vector<int32_t> dec = {1023, 1024, 2599}, pre;
  for (int32_t p = 2590; p < 2600; ++p) pre.push_back(p);
  const int64_t hd = s.n_head * s.head_dim;
  std::vector<float> qd(dec.size() * hd), qp(pre.size() * hd);
  for (auto& x : qp) x = 3 * d(rng);
  for (size_t i = 0; i < dec.size(); ++i)  // decode q = the prefill tile's q at that position
    for (int64_t j = 0; j < hd; ++j)
      qd[i * hd + j] = dec[i] >= 2590 ? qp[(dec[i] - 2590) * hd + j] : 3 * d(rng);
  std::vector<const KvSeqView*> vd(dec.size(), &kv.view), vp(pre.size(), &kv.view);
  std::vector<float> want_d(qd.size()), want_p(qp.size()), got_d(qd.size()), got_p(qp.size());
  attention_ref(qd.data(), static_cast<int64_t>(dec.size()), dec.data(), vd.data(), s, want_d.data());
  attention_ref(qp.data(), static_cast<int64_t>(pre.size()), pre.data(), vp.data(), s, want_p.data());
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (isa > best_isa()) continue;
    set_isa(isa);
    std::vector<float> first;
    for (int threads : {1, 2, 5}) {
      ThreadPool::set_global_threads(threads);
      attention(qd.data(), static_cast<int64_t>(dec.size()), dec.data(), vd.data(), s, got_d.data());
      attention(qp.data(), static_cast<int64_t>(pre.size()), pre.data(), vp.data(), s, got_p.data());
      float worst = 0;
      for (size_t i = 0; i < qd.size(); ++i) worst = std::max(worst, std::fabs(got_d[i] - want_d[i]));
      for (size_t i = 0; i < qp.size(); ++i) worst = std::max(worst, std::fabs(got_p[i] - want_p[i]));
      EXPECT_LE(worst, 2e-5f) << isa_name(isa) << " threads " << threads;
      // position 2599: decode (split in 3) == the tile's last token (one task)
      EXPECT_EQ(0, std::memcmp(got_d.data() + 2 * hd, got_p.data() + 9 * hd, hd * sizeof(float)))
          << isa_name(isa) << " threads " << threads;
      if (first.empty()) first = got_d;
      EXPECT_EQ(0, std::memcmp(first.data(), got_d.data(), got_d.size() * sizeof(float)))
          << "thread count changed the bits: " << isa_name(isa) << " threads " << threads;
    }
  }
  set_isa(isa_before);
  ThreadPool::set_global_threads(0);
}

}  // namespace
}  // namespace brisk
