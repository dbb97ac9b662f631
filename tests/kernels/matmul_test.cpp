#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul_ref.h"
#include "kernels/dispatch.h"
#include "test_rng.h"
#include "kernels/ops.h"
#include "kernels/packed_matrix.h"
#include "tensor/quant.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

using test::rng;

// `view` is what matmul gets: the plain rows, or their packed copy (kernels/packed_matrix.h).
struct Weights {
  std::vector<uint8_t> bytes;
  TensorView plain, view;
  PackedMatrix packed;
};

Weights make_weights(DType t, int64_t k, int64_t rows, bool pack = false) {
  std::normal_distribution<float> nd(0, 0.05f);
  std::vector<float> f(static_cast<size_t>(k));
  Weights w;
  size_t rb = row_bytes(t, k);
  w.bytes.resize(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : f) v = nd(rng());
    quantize_row(t, f.data(), w.bytes.data() + r * rb, k);
  }
  w.view.name = "w";
  w.view.type = t;
  w.view.n_dims = 2;
  w.view.ne = {k, rows, 1, 1};
  w.view.data = w.bytes.data();
  w.plain = w.view;
  if (pack) {
    w.packed = pack_matrix(w.plain);
    w.view = w.packed.view;
  }
  return w;
}

std::vector<float> random_x(int64_t n) {
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng());
  return x;
}

// sum_k |w[r,k]| |x[t,k]| for the tolerance: float accumulation in 16 lanes over k <= 2048
// terms errs by at most ~(k/16 + 4) * 2^-24 of it; 1e-5 leaves room.
std::vector<double> abs_dot(const TensorView& W, const float* x, int64_t n_tok) {
  const int64_t k = W.ne[0], rows = W.rows();
  std::vector<float> w(static_cast<size_t>(k));
  std::vector<double> s(static_cast<size_t>(n_tok * rows));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(W.type, W.row(r), w.data(), k);
    for (int64_t t = 0; t < n_tok; ++t) {
      double a = 0;
      for (int64_t i = 0; i < k; ++i) a += std::fabs(w[i] * x[t * k + i]);
      s[t * rows + r] = a;
    }
  }
  return s;
}

// The 8-bit activation path (packed Q8_0, Q4_0 weights) computes exactly matmul_q8_ref up to
// float accumulation: compare with it, scaled by the magnitude of the quantized activations' dot.
std::vector<float> dequantized_act(const float* x, int64_t n_tok, int64_t k) {
  std::vector<int8_t> q(static_cast<size_t>(k));
  std::vector<float> d(static_cast<size_t>(k / 32)), out(static_cast<size_t>(n_tok * k));
  for (int64_t t = 0; t < n_tok; ++t) {
    quantize_act_ref(x + t * k, k, q.data(), d.data());
    for (int64_t i = 0; i < k; ++i) out[t * k + i] = q[i] * d[i / 32];
  }
  return out;
}

struct Expected {
  std::vector<float> ref;
  std::vector<double> mag;
  double rel = 1e-5;  // tolerance, relative to mag
};

bool plain16(DType t) { return t == DType::F16 || t == DType::BF16; }

// What matmul must give for w and x, and the scale of its rounding error.
Expected expected(const Weights& w, const float* x, int64_t n_tok) {
  const TensorView& W = w.plain;
  Expected e;
  e.ref.resize(static_cast<size_t>(n_tok * W.rows()));
  if (w.view.row_group != 1 && !plain16(W.type)) {
    matmul_q8_ref(W, x, n_tok, e.ref.data());
    std::vector<float> xd = dequantized_act(x, n_tok, W.ne[0]);
    e.mag = abs_dot(W, xd.data(), n_tok);
  } else {
    matmul_ref(W, x, n_tok, e.ref.data());
    e.mag = abs_dot(W, x, n_tok);
    // Packed 16-bit rows accumulate in one lane, column after column: k roundings.
    if (w.view.row_group != 1) e.rel = std::max(e.rel, (W.ne[0] + 2) * 0x1p-24);
  }
  return e;
}

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (int i = 0; i <= static_cast<int>(best_isa()); ++i) v.push_back(static_cast<Isa>(i));
  return v;
}

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_isa(saved); }
};

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                        DType::Q4_0, DType::Q4_K, DType::Q6_K};

// Every type as stored, plus the packed layouts the model uses (kernels/packed_matrix.h).
struct Case {
  DType type;
  bool packed;
};
std::vector<Case> cases() {
  std::vector<Case> v;
  for (DType t : kTypes) v.push_back({t, false});
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::F16, DType::BF16}) v.push_back({t, true});
  return v;
}
std::string case_name(const Case& c) { return std::string(dtype_name(c.type)) + (c.packed ? " packed" : ""); }

TEST(Matmul, EveryIsaMatchesReference) {
  IsaGuard guard;
  for (const Case& c : cases()) {
    const DType t = c.type;
    const int64_t bs = info(t).block_elems;
    std::vector<int64_t> ks = {bs, 3 * bs, 768};
    if (bs == 32) ks.insert(ks.end(), {384, 704});
    if (bs == 1) ks.insert(ks.end(), {1, 7, 33, 100});
    for (int64_t k : ks) {
      for (int64_t rows : {1, 7, 33}) {
        Weights w = make_weights(t, k, rows, c.packed);
        for (int64_t n_tok : {1, 3, 17, 65}) {
          std::vector<float> x = random_x(n_tok * k), y(n_tok * rows);
          for (Isa isa : isas()) {
            set_isa(isa);
            auto [ref, mag, rel] = expected(w, x.data(), n_tok);
            std::fill(y.begin(), y.end(), NAN);
            matmul(w.view, x.data(), n_tok, y.data());
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], ref[i], rel * mag[i] + 1e-30)
                  << case_name(c) << " isa=" << isa_name(isa) << " k=" << k << " rows=" << rows
                  << " n_tok=" << n_tok << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(Matmul, LargerShapesEveryIsa) {
  IsaGuard guard;
  for (const Case& c : cases()) {
    Weights w = make_weights(c.type, 1024, 97, c.packed);
    for (int64_t n_tok : {1, 64, 130}) {
      std::vector<float> x = random_x(n_tok * 1024), y(n_tok * 97);
      for (Isa isa : isas()) {
        set_isa(isa);
        auto [ref, mag, rel] = expected(w, x.data(), n_tok);
        matmul(w.view, x.data(), n_tok, y.data());
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], ref[i], rel * mag[i]) << case_name(c) << " " << isa_name(isa);
      }
    }
  }
}

// Each output is computed by one thread in a fixed order, and a token's result does not
// depend on which other tokens share the batch: bitwise equal results.
TEST(Matmul, DeterministicAcrossThreadsAndBatches) {
  IsaGuard guard;
  for (const Case& cs : cases()) {
    const int64_t k = 512, rows = 77, n_tok = 21;
    Weights w = make_weights(cs.type, k, rows, cs.packed);
    std::vector<float> x = random_x(n_tok * k);
    for (Isa isa : isas()) {
      set_isa(isa);
      std::vector<float> a(n_tok * rows), b(n_tok * rows), c(rows);
      ThreadPool::set_global_threads(1);
      matmul(w.view, x.data(), n_tok, a.data());
      ThreadPool::set_global_threads(3);
      matmul(w.view, x.data(), n_tok, b.data());
      ThreadPool::set_global_threads(0);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << case_name(cs) << isa_name(isa);
      for (int64_t tk : {int64_t(0), int64_t(13), n_tok - 1}) {
        matmul(w.view, x.data() + tk * k, 1, c.data());
        EXPECT_EQ(0, std::memcmp(c.data(), a.data() + tk * rows, rows * 4))
            << case_name(cs) << isa_name(isa) << " token " << tk;
      }
      // A few tokens (a speculative verification pass: the fused multi-token GEMV for
      // unpacked weights) give each token the bits it gets in the large batch.
      for (int64_t few : {int64_t(2), int64_t(4), int64_t(5), int64_t(7), int64_t(8)}) {
        std::vector<float> f(few * rows);
        matmul(w.view, x.data() + 3 * k, few, f.data());
        EXPECT_EQ(0, std::memcmp(f.data(), a.data() + 3 * rows, f.size() * 4))
            << case_name(cs) << isa_name(isa) << " " << few << " tokens";
      }
    }
  }
}

// 8-bit activations: every ISA quantizes exactly as the reference definition, and the
// matmul stays within the quantization error bound of the float result:
// |y - y_f32| <= sum_i |w_i| * d_b(i) / 2 (+ float rounding).
TEST(Matmul, Q8ActivationsExactAndWithinBound) {
  IsaGuard guard;
  for (int64_t k : {32, 96, 160, 2048}) {
    std::vector<float> x = random_x(3 * k);
    x[5] = 0;
    std::fill(x.begin() + k, x.begin() + k + 32, 0.0f);  // an all-zero block: d = 0
    std::vector<int8_t> q_ref(k), q(k);
    std::vector<float> d_ref(k / 32), d(k / 32);
    for (int64_t t = 0; t < 3; ++t) {
      quantize_act_ref(x.data() + t * k, k, q_ref.data(), d_ref.data());
      for (Isa isa : isas()) {
        const KernelTable& kt = kernel_table(isa);
        kt.quantize_act(x.data() + t * k, k, q.data(), d.data());
        ASSERT_EQ(q_ref, q) << isa_name(isa) << " k=" << k;
        ASSERT_EQ(d_ref, d) << isa_name(isa) << " k=" << k;
      }
    }
    for (DType t : {DType::Q8_0, DType::Q4_0}) {
      Weights w = make_weights(t, k, 19, true);
      std::vector<float> ref(3 * 19), y(3 * 19), wf(k);
      matmul_ref(w.plain, x.data(), 3, ref.data());
      for (Isa isa : isas()) {
        set_isa(isa);
        matmul(w.view, x.data(), 3, y.data());
        for (int64_t tk = 0; tk < 3; ++tk) {
          quantize_act_ref(x.data() + tk * k, k, q_ref.data(), d_ref.data());
          for (int64_t r = 0; r < 19; ++r) {
            dequantize_row(t, w.plain.row(r), wf.data(), k);
            double bound = 0, mag = 0;
            for (int64_t i = 0; i < k; ++i) {
              bound += std::fabs(wf[i]) * d_ref[i / 32] / 2;
              mag += std::fabs(wf[i] * x[tk * k + i]);
            }
            ASSERT_NEAR(y[tk * 19 + r], ref[tk * 19 + r], bound * 1.0001 + 1e-5 * mag)
                << dtype_name(t) << " " << isa_name(isa) << " k=" << k;
          }
        }
      }
    }
  }
}

// matmul_multi computes each weight exactly as matmul does (bitwise), also for mixed types
// and a weight (F32) that has no fused decode kernel.
TEST(Matmul, MultiEqualsSeparateMatmuls) {
  IsaGuard guard;
  const int64_t k = 256;
  std::vector<Weights> ws;
  for (auto [t, rows] : {std::pair{DType::Q4_0, 37}, {DType::Q8_0, 5}, {DType::Q4_K, 16}, {DType::Q6_K, 9},
                         {DType::F16, 3}, {DType::BF16, 21}, {DType::F32, 7}, {DType::Q4_K, 33}})
    ws.push_back(make_weights(t, k, rows, t != DType::F16 && t != DType::F32 && rows != 33));
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int64_t n_tok : {1, 2, 5, 9}) {  // 5: the fused multi-token GEMV; 9: past it
      std::vector<float> x = random_x(n_tok * k);
      for (size_t n : {size_t(2), size_t(3), ws.size() - 1, ws.size()}) {
        std::vector<std::vector<float>> a(n), b(n);
        std::vector<const TensorView*> W;
        std::vector<float*> Y;
        for (size_t i = 0; i < n; ++i) {
          a[i].assign(n_tok * ws[i].view.rows(), NAN);
          b[i].assign(n_tok * ws[i].view.rows(), NAN);
          matmul(ws[i].view, x.data(), n_tok, a[i].data());
          W.push_back(&ws[i].view);
          Y.push_back(b[i].data());
        }
        matmul_multi(W.data(), Y.data(), static_cast<int>(n), x.data(), n_tok);
        for (size_t i = 0; i < n; ++i)
          EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4))
              << isa_name(isa) << " weight " << i << " of " << n << " n_tok=" << n_tok;
      }
    }
  }
}

// The packed kernels run one fixed sequence of roundings per row on every ISA (dispatch.h:
// PackedDotFn), so the vector paths equal the scalar one bit for bit, decode and prefill.
TEST(Matmul, PackedEveryIsaBitIdenticalToScalar) {
  IsaGuard guard;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::F16, DType::BF16}) {
    for (auto [k, rows] : {std::pair<int64_t, int64_t>{256, 1}, {768, 17}, {2048, 50}, {4096, 33}}) {
      Weights w = make_weights(t, k, rows, true);
      for (int64_t n_tok : {1, 2, 3, 5, 9, 70}) {
        std::vector<float> x = random_x(n_tok * k), ref(n_tok * rows), y(n_tok * rows);
        set_isa(Isa::scalar);
        matmul(w.view, x.data(), n_tok, ref.data());
        for (Isa isa : isas()) {
          set_isa(isa);
          std::fill(y.begin(), y.end(), NAN);
          matmul(w.view, x.data(), n_tok, y.data());
          ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), y.size() * 4))
              << dtype_name(t) << " " << isa_name(isa) << " k=" << k << " rows=" << rows << " n_tok=" << n_tok;
        }
      }
    }
  }
}

TEST(Kernels, PackedMatrixRefusesWhatItCannotPack) {
  Weights f = make_weights(DType::F32, 256, 4);
  EXPECT_FALSE(packable(f.view));
  EXPECT_THROW(pack_matrix(f.view), Error);
  Weights q = make_weights(DType::Q4_0, 64, 20, true);
  EXPECT_FALSE(packable(q.view));  // already packed
  std::vector<float> row(64);
  EXPECT_THROW(get_row(q.view, 0, row.data()), Error);
}

TEST(Kernels, EveryIsaDequantizesExactly) {
  for (DType t : kTypes) {
    const int64_t k = info(t).block_elems == 1 ? 77 : 512;
    Weights w = make_weights(t, k, 3);
    std::vector<float> ref(k), y(k);
    for (Isa isa : isas()) {
      const KernelTable& kt = kernel_table(isa);
      for (int64_t r = 0; r < 3; ++r) {
        dequantize_row(t, w.view.row(r), ref.data(), k);
        kt.dequant[static_cast<int>(t)](w.view.row(r), y.data(), k);
        ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), k * 4)) << dtype_name(t) << isa_name(isa);
      }
    }
  }
}

TEST(Kernels, GetRow) {
  IsaGuard guard;
  Weights w = make_weights(DType::Q6_K, 256, 5);
  std::vector<float> ref(256), y(256);
  dequantize_row(DType::Q6_K, w.view.row(3), ref.data(), 256);
  for (Isa isa : isas()) {
    set_isa(isa);
    get_row(w.view, 3, y.data());
    EXPECT_EQ(ref, y);
  }
  EXPECT_THROW(get_row(w.view, 5, y.data()), Error);
}

TEST(Kernels, IsaNames) {
  EXPECT_STREQ(isa_name(Isa::avx2), "avx2");
  IsaGuard guard;
  set_isa(Isa::scalar);
  EXPECT_EQ(active_isa(), Isa::scalar);
  EXPECT_EQ(kernel_table().isa, Isa::scalar);
}

}  // namespace
}  // namespace brisk
