// Attention over compressed KV blocks (decoded inside the kernel) equals attention_ref
// over their dequantized copy, for every codec, instruction set and thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kv/kv_cache.h"
#include "kv/kv_codec.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

// Attention at positions `pos` over `coded` equals attention_ref over `copy` (its
// dequantized twin) within 2e-5, on every instruction set of this CPU at 1 and 3 threads.
// The rotated codecs work in the rotated domain (q rotated, output un-rotated): a few more
// float roundings than the copy's path. f16 rows widen exactly, so f16 attention must equal
// the f32 kernel over the copy bit for bit (the AVX2 and AVX-512 kernels read f16 rows
// directly, the SSE one decodes them first).
void expect_equals_copy(const KvCache& coded, const KvCache& copy, const AttentionShape& s,
                        const std::vector<int32_t>& pos, std::mt19937& rng, const std::string& label) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t T = static_cast<int64_t>(pos.size());
  std::vector<const KvSeqView*> vc(T, &coded.view(0, 0)), vr(T, &copy.view(0, 0));
  std::vector<float> q(T * s.n_head * s.head_dim), want(q.size()), got(q.size()), same(q.size());
  for (auto& x : q) x = 2.0f * g(rng);
  attention_ref(q.data(), T, pos.data(), vr.data(), s, want.data());
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (isa > best_isa()) continue;
    set_isa(isa);
    for (int threads : {1, 3}) {
      ThreadPool::set_global_threads(threads);
      attention(q.data(), T, pos.data(), vc.data(), s, got.data());
      float worst = 0;
      for (size_t i = 0; i < q.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LE(worst, 2e-5f) << label << " " << isa_name(isa) << " threads " << threads;
      if (coded.shape().kv_type != KvType::f16) continue;
      attention(q.data(), T, pos.data(), vr.data(), s, same.data());
      size_t differ = 0;
      for (size_t i = 0; i < q.size(); ++i) differ += got[i] != same[i];
      EXPECT_EQ(differ, 0u) << label << " " << isa_name(isa) << " threads " << threads;
    }
  }
}

TEST(AttentionKvCodec, CompressedEqualsDequantizedCopy) {
  std::mt19937 rng(21);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const Isa isa_before = active_isa();
  for (KvType t : {KvType::f16, KvType::int8, KvType::int4, KvType::int4r, KvType::nsn2}) {
    for (AttentionShape s : {AttentionShape{6, 2, 64, 0.125f}, AttentionShape{4, 1, 128, 0.09f}}) {
      // Managed caches with blocks of 16 positions, the table in scrambled order; past
      // 1,024 positions so that decodes split into segments (flash-decoding).
      const int64_t n_pos = 1100, bs = 16, nb = (n_pos + bs - 1) / bs, d = s.head_dim;
      KvCacheShape cs{1, 1, n_pos, s.n_head_kv, d, bs, nb};
      KvCacheShape ds = cs;
      cs.kv_type = t;
      KvCache coded(cs), copy(ds);
      for (int64_t j = 0; j < nb; ++j) {
        coded.set_block(0, j, static_cast<int32_t>(nb - 1 - j));
        copy.set_block(0, j, static_cast<int32_t>(nb - 1 - j));
      }
      const int64_t row = s.n_head_kv * d, hb = kv_head_bytes(t, d);
      std::vector<float> k(row), v(row), kd(row), vd(row);
      std::vector<uint8_t> buf(hb);
      for (int64_t p = 0; p < n_pos; ++p) {
        for (auto& x : k) x = g(rng);
        for (auto& x : v) x = g(rng);
        coded.store(0, 0, p, k.data(), v.data());
        for (int64_t h = 0; h < s.n_head_kv; ++h) {  // the dequantized copy
          encode_kv_head(t, k.data() + h * d, d, buf.data());
          decode_kv_head(t, buf.data(), d, kd.data() + h * d);
          encode_kv_head(t, v.data() + h * d, d, buf.data());
          decode_kv_head(t, buf.data(), d, vd.data() + h * d);
        }
        copy.store(0, 0, p, kd.data(), vd.data());
      }
      coded.set_length(0, n_pos);
      copy.set_length(0, n_pos);
      // decode steps at a few depths (two split), then a prefill run of 100 tokens
      std::vector<int32_t> pos{0, 17, 63, 64, 149, 1030, 1099};
      for (int32_t p = 40; p < 140; ++p) pos.push_back(p);
      expect_equals_copy(coded, copy, s, pos, rng,
                         std::string(kv_type_name(t)) + " head_dim " + std::to_string(d));
    }
  }
  set_isa(isa_before);
  ThreadPool::set_global_threads(0);
}

TEST(AttentionKvCodec, KiviEqualsDequantizedCopy) {
  // kivi4 K is decoded per group (and from the exact residual past the last full group);
  // the copy holds what the cache's reference decoders (decode_k / decode_v) return.
  std::mt19937 rng(22);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const Isa isa_before = active_isa();
  for (AttentionShape s : {AttentionShape{6, 2, 64, 0.125f}, AttentionShape{4, 1, 128, 0.09f}}) {
    const int64_t n_pos = 150, d = s.head_dim, row = s.n_head_kv * d;
    for (int64_t bs : {int64_t{0}, int64_t{64}}) {  // one block per slot, or blocks of 64
      KvCacheShape cs{1, 1, n_pos, s.n_head_kv, d, bs};
      KvCacheShape ds = cs;
      cs.kv_type = KvType::kivi4;
      KvCache coded(cs), copy(ds);
      std::vector<float> k(row), v(row);
      for (int64_t p = 0; p < n_pos; ++p) {
        for (auto& x : k) x = g(rng);
        for (auto& x : v) x = g(rng);
        k[5] += 6.0f;  // an offset channel, as real keys have
        coded.store(0, 0, p, k.data(), v.data());
      }
      for (int64_t p = 0; p < n_pos; ++p) {
        for (int64_t h = 0; h < s.n_head_kv; ++h) {
          coded.decode_k(0, 0, p, h, k.data() + h * d);
          coded.decode_v(0, 0, p, h, v.data() + h * d);
        }
        copy.store(0, 0, p, k.data(), v.data());
      }
      coded.set_length(0, n_pos);
      copy.set_length(0, n_pos);
      std::vector<int32_t> pos{0, 31, 32, 127, 128, 149};
      for (int32_t p = 40; p < 140; ++p) pos.push_back(p);
      expect_equals_copy(coded, copy, s, pos, rng,
                         "head_dim " + std::to_string(d) + " block " + std::to_string(bs));
    }
  }
  set_isa(isa_before);
  ThreadPool::set_global_threads(0);
}

}  // namespace
}  // namespace brisk
