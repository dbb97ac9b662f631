// CudaModel: model/llama.cpp's forward pass on the GPU (see cuda_model.h for the KV cache
// contract). Per layer, for T tokens:
//
//   h = rmsnorm(x) * attn_norm                      (fused with the residual add)
//   qkv = h [Wq|Wk|Wv]                               one matrix when the dtypes agree
//   q, K, V = qkv_post(qkv): bias, q/k norm, RoPE; K/V encoded into the GPU cache (one
//                                                    token, llama RoPE, f16 cache: in the
//                                                    qkv GEMV's epilogue instead)
//   att = attention(q, cache)                        flash decoding for short runs of a
//                                                    sequence (and every run over a
//                                                    compressed cache, dequantizing in
//                                                    registers), the fused tensor-core
//                                                    prefill (FlashAttention-2) for longer
//                                                    runs over an f16 cache
//   x += att Wo;  h = rmsnorm(x) * ffn_norm
//   x += (silu(h Wgate) * h Wup) Wdown               [Wgate|Wup] one matrix
//
// Matrix products: T <= 8 through the hand-written GEMV (weights in their GGUF dtype,
// dequantized in registers), larger T through cuBLAS (F16/BF16 weights used directly,
// Q8_0/Q4_0 dequantized to an f16 scratch per product). A batch of one token with one
// logits row (the decode step) is captured once as a CUDA graph and replayed.
#include "model/cuda/cuda_model.h"

#include <cstdlib>

#include "util/error.h"

#if defined(BRISK_CUDA)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/cuda_ops.h"
#include "model/rope_freqs.h"
#include "model/weights.h"
#endif

namespace brisk {

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda" || name == "gpu") return Device::Cuda;
  fail("--device: unknown device '{}' (cpu or cuda)", name);
}

std::unique_ptr<Model> make_model_on(ModelSource src, Device device) {
  return device == Device::Cuda ? make_cuda_model(std::move(src)) : make_model(std::move(src));
}

#if !defined(BRISK_CUDA)

bool cuda_available() { return false; }
std::string cuda_unavailable_reason() { return "brisk was built without CUDA (BRISK_CUDA=OFF)"; }
std::unique_ptr<Model> make_cuda_model(ModelSource) { fail("--device cuda: {}", cuda_unavailable_reason()); }
const CudaModelInfo* cuda_model_info(const Model&) { return nullptr; }

#else

using cuda::check;
using cuda::DevMatrix;

std::string cuda_unavailable_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return fmt::format("no CUDA device ({})", cudaGetErrorString(e));
  if (n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  if (p.major < 9)
    return fmt::format("device 0 ({}) has compute capability {}.{}; brisk's CUDA build needs 9.0 (Hopper)", p.name,
                       p.major, p.minor);
  return "";
}

bool cuda_available() {
  static const bool ok = cuda_unavailable_reason().empty();
  return ok;
}

namespace {

template <class T>
T* dev_alloc(size_t n) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

float* upload_floats(const std::vector<float>& v) {
  if (v.empty()) return nullptr;
  float* d = dev_alloc<float>(v.size());
  check(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
  return d;
}

struct DevLayer {
  float *attn_norm = nullptr, *ffn_norm = nullptr;
  float *bq = nullptr, *bk = nullptr, *bv = nullptr, *q_norm = nullptr, *k_norm = nullptr;
  bool qkv_fused = false, gu_fused = false;
  DevMatrix qkv, wq, wk, wv;  // qkv when fused, else wq/wk/wv
  DevMatrix wo;
  DevMatrix gu, gate, up;  // gu when fused
  DevMatrix down;
};

// A device buffer that only grows.
template <class T>
struct Buf {
  T* p = nullptr;
  size_t n = 0;
  bool reserve(size_t want) {  // true when it moved
    if (want <= n) return false;
    if (p) cudaFree(p);
    p = dev_alloc<T>(want);
    n = want;
    return true;
  }
  ~Buf() {
    if (p) cudaFree(p);
  }
};

struct Segment {
  int i0, n, p0, seq;  // batch tokens [i0, i0 + n) of `seq`, positions p0 ..
};

class CudaModel final : public Model {
 public:
  CudaModel(ModelSource src, ModelConfig cfg) : Model(std::move(src), std::move(cfg)) {
    if (!cuda_available()) fail("--device cuda: {}", cuda_unavailable_reason());
    const ModelConfig& c = config_;
    check(cudaSetDevice(0), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    n_sm_ = prop.multiProcessorCount;
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    if (cuda::cublas_api().create(&blas_) != CUBLAS_STATUS_SUCCESS) fail("cublasCreate failed");

    Weights w = load_weights(source_, config_);
    auto up1 = [&](const TensorView& t) {
      DevMatrix m = cuda::upload_matrix(t);
      track(m);
      return m;
    };
    auto upn = [&](std::initializer_list<const TensorView*> ts) {
      std::vector<const TensorView*> v(ts);
      DevMatrix m = cuda::upload_matrix(v.data(), static_cast<int>(v.size()));
      track(m);
      return m;
    };
    embd_ = up1(w.token_embd);
    tied_ = w.output.data == w.token_embd.data;
    output_ = tied_ ? embd_ : up1(w.output);
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const LayerWeights& L = w.layers[static_cast<size_t>(l)];
      DevLayer& d = layers_[static_cast<size_t>(l)];
      d.attn_norm = upload_floats(L.attn_norm);
      d.ffn_norm = upload_floats(L.ffn_norm);
      d.bq = upload_floats(L.bq);
      d.bk = upload_floats(L.bk);
      d.bv = upload_floats(L.bv);
      d.q_norm = upload_floats(L.q_norm);
      d.k_norm = upload_floats(L.k_norm);
      d.qkv_fused = L.wq.type == L.wk.type && L.wq.type == L.wv.type;
      if (d.qkv_fused) {
        d.qkv = upn({&L.wq, &L.wk, &L.wv});
      } else {
        d.wq = up1(L.wq), d.wk = up1(L.wk), d.wv = up1(L.wv);
      }
      d.wo = up1(L.wo);
      d.gu_fused = L.gate.type == L.up.type;
      if (d.gu_fused) {
        d.gu = upn({&L.gate, &L.up});
      } else {
        d.gate = up1(L.gate), d.up = up1(L.up);
      }
      d.down = up1(L.down);
    }
    out_norm_ = upload_floats(w.output_norm);
    inv_freq_ = upload_floats(rope_inv_freq(c.rope_base, c.head_dim, w.rope_freqs));
    // one decode step reads every matrix once and one embedding row
    info_.weight_bytes_per_token -= embd_.bytes();
    if (tied_) info_.weight_bytes_per_token += embd_.bytes();
    info_.weight_bytes_per_token += embd_.bytes() / static_cast<size_t>(embd_.rows);
    dims_.n_head = static_cast<int>(c.n_head);
    dims_.n_head_kv = static_cast<int>(c.n_head_kv);
    dims_.head_dim = static_cast<int>(c.head_dim);
    dims_.eps = c.norm_eps;
    dims_.neox = c.rope_neox;
    set_kv_type(KvType::f32);
    const char* g = std::getenv("BRISK_CUDA_GRAPH");
    use_graph_ = !(g && std::string(g) == "0");
  }

  ~CudaModel() override {
    cudaStreamSynchronize(stream_);
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    for (DevMatrix* m : {&embd_}) cuda::free_matrix(*m);
    if (!tied_) cuda::free_matrix(output_);
    for (DevLayer& d : layers_) {
      for (DevMatrix* m : {&d.qkv, &d.wq, &d.wk, &d.wv, &d.wo, &d.gu, &d.gate, &d.up, &d.down}) cuda::free_matrix(*m);
      for (float* p : {d.attn_norm, d.ffn_norm, d.bq, d.bk, d.bv, d.q_norm, d.k_norm})
        if (p) cudaFree(p);
    }
    if (out_norm_) cudaFree(out_norm_);
    if (inv_freq_) cudaFree(inv_freq_);
    if (kv_k_) cudaFree(kv_k_);
    if (kv_v_) cudaFree(kv_v_);
    if (nsn2_codebook_) cudaFree(nsn2_codebook_);
    if (h_stage_) cudaFreeHost(h_stage_);
    if (h_logits_) cudaFreeHost(h_logits_);
    cuda::cublas_api().destroy(blas_);
    cudaStreamDestroy(stream_);
  }

  const CudaModelInfo& info() const { return info_; }

  // K/V live in this model's own GPU cache, not in the caller's blocks: the engine must not
  // share blocks between sequences (prefix caching) with this model.
  bool uses_kv_blocks() const override { return false; }
  // f32 (stored as f16, as this backend always did), f16, int8, int4, int4r, nsn2.
  void set_kv_type(KvType t) override {
    if (t == KvType::kivi4)
      fail("--kv-type kivi4: the CUDA backend stores f32 (as f16), f16, int8, int4, int4r and nsn2 K/V (kivi4 is "
           "CPU-only)");
    Model::set_kv_type(t);  // the codec's head_dim rules
    if (t == KvType::nsn2 && !nsn2_codebook_) {
      const size_t n = static_cast<size_t>(kNsnCodes * kNsnSub);
      nsn2_codebook_ = dev_alloc<float>(n);
      check(cudaMemcpy(nsn2_codebook_, nsn2_codebook(), n * sizeof(float), cudaMemcpyHostToDevice), "upload");
    }
    cuda::LayerKv probe{nullptr, nullptr, t, cuda::kv_row_bytes_of(t, static_cast<int>(config_.head_dim)),
                        nsn2_codebook_};
    cuda::check_kv(probe, dims_);
    kv_row_bytes_ = static_cast<size_t>(probe.row_bytes);
    info_.kv_bytes_per_position =
        static_cast<size_t>(config_.n_layer) * 2 * static_cast<size_t>(config_.n_head_kv) * kv_row_bytes_;
  }
  void set_kv_evict(const std::string& spec) override {
    if (parse_eviction(spec).policy != "none")
      fail("--kv-evict {}: the CUDA backend keeps all K/V (token eviction is CPU-only)", spec);
  }

  void forward(const Batch& b, KvCache& cache, std::vector<float>& logits) override {
    const ModelConfig& c = config_;
    validate(b, cache);
    logits.clear();
    const int T = static_cast<int>(b.size());
    if (T == 0) return;
    ensure_kv(cache, b);

    // segments: runs of consecutive tokens of one sequence
    segs_.clear();
    for (int t = 0; t < T; ++t) {
      if (!segs_.empty() && segs_.back().seq == b.seq[t] && segs_.back().p0 + segs_.back().n == b.pos[t])
        ++segs_.back().n;
      else
        segs_.push_back({t, 1, b.pos[t], b.seq[t]});
    }
    int n_out = 0;
    for (int t = 0; t < T; ++t) n_out += b.logits[t] ? 1 : 0;
    ensure_buffers(T, n_out);

    // inputs through pinned staging
    int32_t* st = h_stage_;
    std::memcpy(st, b.tokens.data(), sizeof(int32_t) * T);
    std::memcpy(st + cap_T_, b.pos.data(), sizeof(int32_t) * T);
    std::memcpy(st + 2 * cap_T_, b.seq.data(), sizeof(int32_t) * T);
    for (int t = 0, o = 0; t < T; ++t)
      if (b.logits[t]) st[3 * cap_T_ + o++] = t;
    check(cudaMemcpyAsync(d_in_.p, st, sizeof(int32_t) * 4 * cap_T_, cudaMemcpyHostToDevice, stream_), "inputs");

    const bool graphable = use_graph_ && T == 1 && n_out == 1;
    if (graphable) {
      if (!graph_exec_) capture();
      check(cudaGraphLaunch(graph_exec_, stream_), "cudaGraphLaunch");
    } else {
      run(T, n_out);
    }
    if (n_out > 0) {
      const size_t n = static_cast<size_t>(n_out) * static_cast<size_t>(c.n_vocab);
      check(cudaMemcpyAsync(h_logits_, logits_.p, n * sizeof(float), cudaMemcpyDeviceToHost, stream_), "logits");
      check(cudaStreamSynchronize(stream_), "forward");
      logits.assign(h_logits_, h_logits_ + n);
    } else {
      check(cudaStreamSynchronize(stream_), "forward");
    }
    for (const auto& [s, last] : last_pos_) cache.set_length(s, last + 1);
  }

 private:
  void track(const DevMatrix& m) {
    info_.weight_bytes_per_token += m.bytes();
    info_.device_bytes += m.bytes();
    max_cols_ = std::max(max_cols_, m.cols);
    if (m.type == cuda::WType::Q8_0 || m.type == cuda::WType::Q4_0)
      max_q_elems_ = std::max<size_t>(max_q_elems_, static_cast<size_t>(m.rows * m.cols));
  }

  static bool quantized(const DevMatrix& m) { return m.type == cuda::WType::Q8_0 || m.type == cuda::WType::Q4_0; }

  // xq: x as its producer already quantized it (GEMV path only; used when W is Q8_0/Q4_0).
  // x16: x as its producer already wrote it in W's 16-bit type (cuBLAS path only).
  void linear(const DevMatrix& W, const float* x, int T, float* y, int64_t ldy, const cuda::QuantAct* xq = nullptr,
              const cuda::Act16* x16 = nullptr) {
    if (T <= cuda::kMaxGemvTokens) {
      cuda::gemv(W, x, W.cols, T, y, ldy, gemv_scratch_.p, stream_, quantized(W) ? xq : nullptr);
    } else {
      cuda::gemm(blas_, W, x, T, y, ldy, wscratch_.p, xscratch_.p, stream_, x16 ? x16->p : nullptr);
    }
  }

  // The 16-bit input the cuBLAS path reads for all of `ms` when a producer can write it
  // directly (in xscratch_: no GEMM without x16 runs between the producer and its consumers),
  // or none when one of them is F32 (SGEMM reads f32) or they disagree on f16 / bf16.
  std::optional<cuda::Act16> gemm_input16(std::initializer_list<const DevMatrix*> ms) const {
    const bool bf16 = cuda::gemm_bf16(**ms.begin());
    for (const DevMatrix* m : ms)
      if (m->type == cuda::WType::F32 || cuda::gemm_bf16(*m) != bf16) return std::nullopt;
    return cuda::Act16{xscratch_.p, bf16};
  }

  void capture() {
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      run(1, 1);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&graph_exec_, graph, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(graph);
  }

  void drop_graph() {
    if (graph_exec_) {
      cudaStreamSynchronize(stream_);
      cudaGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
    }
  }

  // The whole forward pass on the stream; inputs already in d_in_.
  void run(int T, int n_out) {
    const ModelConfig& c = config_;
    const int64_t E = c.n_embd, F = c.n_ff, QD = c.q_dim(), KD = c.kv_dim(), QKV = QD + 2 * KD;
    const int32_t* d_tok = d_in_.p;
    const int32_t* d_pos = d_in_.p + cap_T_;
    const int32_t* d_seq = d_in_.p + 2 * cap_T_;
    const int32_t* d_idx = d_in_.p + 3 * cap_T_;
    float *x = x_.p, *h = h_.p, *qkv = qkv_.p, *q = q_.p, *att = att_.p, *tmp = tmp_.p, *gu = gu_.p, *act = act_.p;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    bool any_long = false;
    for (const Segment& s : segs_) any_long = any_long || tc_prefill(s);
    if (T == 1 && n_out == 1) any_long = false;  // (graph capture: segs_ describes one token)
    const int n_split = cuda::attention_splits(T, dims_, n_sm_);
    // Decode-sized batches: the norms, the attention merge and SwiGLU write their output
    // already quantized for a Q8_0/Q4_0 consumer (no separate quantize launch).
    const bool gemv_path = T <= cuda::kMaxGemvTokens;
    const cuda::QuantAct hq = cuda::quant_act_in(hq_.p, E, cuda::kMaxGemvTokens);
    const cuda::QuantAct attq = cuda::quant_act_in(attq_.p, QD, cuda::kMaxGemvTokens);
    const cuda::QuantAct actq = cuda::quant_act_in(actq_.p, F, cuda::kMaxGemvTokens);
    // cuBLAS-sized batches: the norms and SwiGLU write the next GEMM's 16-bit input directly.
    auto input16 = [&](std::initializer_list<const DevMatrix*> ms) {
      return gemv_path ? std::nullopt : gemm_input16(ms);
    };

    cuda::embed_rows(embd_, d_tok, T, x, stream_);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const DevLayer& L = layers_[static_cast<size_t>(l)];
      const bool q_qkv = gemv_path && (L.qkv_fused ? quantized(L.qkv) : quantized(L.wq) || quantized(L.wk) || quantized(L.wv));
      const bool q_gu = gemv_path && (L.gu_fused ? quantized(L.gu) : quantized(L.gate) || quantized(L.up));
      const bool q_wo = gemv_path && quantized(L.wo) && !any_long && c.head_dim % 32 == 0;
      const bool q_down = gemv_path && quantized(L.down);
      // x += previous layer's MLP output (none before layer 0); h = norm(x)
      const auto h16 = L.qkv_fused ? input16({&L.qkv}) : input16({&L.wq, &L.wk, &L.wv});
      const cuda::Act16* h16p = h16 ? &*h16 : nullptr;
      cuda::add_rmsnorm(x, l == 0 ? nullptr : tmp, L.attn_norm, T, E, c.norm_eps, h, stream_, q_qkv ? &hq : nullptr,
                        h16p);
      const cuda::LayerKv kv{kv_k_ + l * kv_layer_bytes_, kv_v_ + l * kv_layer_bytes_, kv_type_,
                             static_cast<int64_t>(kv_row_bytes_), nsn2_codebook_};
      // One token: RoPE and the K/V store in the qkv GEMV's epilogue where it can (no qkv_post).
      const bool qkv_rope = T == 1 && L.qkv_fused &&
                            cuda::qkv_rope_fusable(dims_, kv_type_, L.bq || L.bk || L.bv || L.q_norm || L.k_norm);
      if (qkv_rope) {
        cuda::gemv_qkv_rope(L.qkv, h, gemv_scratch_.p, q_qkv ? &hq : nullptr, dims_, inv_freq_, d_pos, d_seq, q, kv,
                            stream_);
      } else {
        if (L.qkv_fused) {
          linear(L.qkv, h, T, qkv, QKV, q_qkv ? &hq : nullptr, h16p);
        } else {
          linear(L.wq, h, T, qkv, QKV, q_qkv ? &hq : nullptr, h16p);
          linear(L.wk, h, T, qkv + QD, QKV, q_qkv ? &hq : nullptr, h16p);
          linear(L.wv, h, T, qkv + QD + KD, QKV, q_qkv ? &hq : nullptr, h16p);
        }
        cuda::qkv_post(qkv, T, dims_, L.bq, L.bk, L.bv, L.q_norm, L.k_norm, inv_freq_, d_pos, d_seq, q,
                       any_long ? q16_.p : nullptr, kv, stream_);
      }
      if (T == 1 && n_out == 1) {
        cuda::attention_decode(q, 1, d_pos, d_seq, dims_, kv, scale, n_split, part_.p, att, stream_,
                               q_wo ? &attq : nullptr);
      } else {
        // runs of short segments go through flash decoding together; long ones through the prefill
        size_t i = 0;
        while (i < segs_.size()) {
          if (tc_prefill(segs_[i])) {
            const Segment& s = segs_[i];
            cuda::attention_prefill(q16_.p + static_cast<int64_t>(s.i0) * QD, s.n, s.p0, s.seq, dims_, kv, scale,
                                    att + static_cast<int64_t>(s.i0) * QD, QD, stream_);
            ++i;
            continue;
          }
          size_t j = i;
          while (j < segs_.size() && !tc_prefill(segs_[j])) ++j;
          const int i0 = segs_[i].i0, i1 = segs_[j - 1].i0 + segs_[j - 1].n;
          // without long segments this is one call over all T tokens (i0 = 0)
          cuda::attention_decode(q + static_cast<int64_t>(i0) * QD, i1 - i0, d_pos + i0, d_seq + i0, dims_, kv, scale,
                                 n_split, part_.p, att + static_cast<int64_t>(i0) * QD, stream_,
                                 q_wo ? &attq : nullptr);
          i = j;
        }
      }
      linear(L.wo, att, T, tmp, E, q_wo ? &attq : nullptr);
      const auto g16 = L.gu_fused ? input16({&L.gu}) : input16({&L.gate, &L.up});
      const cuda::Act16* g16p = g16 ? &*g16 : nullptr;
      cuda::add_rmsnorm(x, tmp, L.ffn_norm, T, E, c.norm_eps, h, stream_, q_gu ? &hq : nullptr, g16p);
      if (L.gu_fused) {
        linear(L.gu, h, T, gu, 2 * F, q_gu ? &hq : nullptr, g16p);
      } else {
        linear(L.gate, h, T, gu, 2 * F, q_gu ? &hq : nullptr, g16p);
        linear(L.up, h, T, gu + F, 2 * F, q_gu ? &hq : nullptr, g16p);
      }
      const auto a16 = input16({&L.down});
      const cuda::Act16* a16p = a16 ? &*a16 : nullptr;
      cuda::swiglu(gu, T, F, act, stream_, q_down ? &actq : nullptr, a16p);
      linear(L.down, act, T, tmp, E, q_down ? &actq : nullptr, a16p);
    }
    if (n_out == 0) return;
    cuda::add_rmsnorm(x, tmp, nullptr, T, E, c.norm_eps, nullptr, stream_);
    cuda::gather_rows(x, d_idx, n_out, E, tmp, stream_);
    cuda::add_rmsnorm(tmp, nullptr, out_norm_, n_out, E, c.norm_eps, h, stream_);
    linear(output_, h, n_out, logits_.p, c.n_vocab);
  }

  void ensure_kv(const KvCache& cache, const Batch& b) {
    const KvCacheShape& cs = cache.shape();
    const int64_t n_seq = cs.n_seq, n_ctx = cs.n_ctx;
    if (n_seq != kv_seq_ || n_ctx != kv_ctx_ || kv_type_ != kv_alloc_type_) {
      drop_graph();
      if (kv_k_) cudaFree(kv_k_), kv_k_ = nullptr;
      if (kv_v_) cudaFree(kv_v_), kv_v_ = nullptr;
      kv_seq_ = kv_ctx_ = 0;
      // the allocation shrinks with the codec: kv_row_bytes_ per head vector
      kv_layer_bytes_ = static_cast<size_t>(n_seq) * static_cast<size_t>(config_.n_head_kv) *
                        static_cast<size_t>(n_ctx) * kv_row_bytes_;
      const size_t total = kv_layer_bytes_ * static_cast<size_t>(config_.n_layer);
      kv_k_ = dev_alloc<uint8_t>(total);
      kv_v_ = dev_alloc<uint8_t>(total);
      kv_seq_ = n_seq, kv_ctx_ = n_ctx, kv_alloc_type_ = kv_type_;  // (the graph was dropped)
      dims_.n_ctx = n_ctx;
      kv_owner_ = nullptr;
    }
    if (kv_owner_ != &cache) {
      for (const auto& [s, first] : first_pos_)
        if (first != 0)
          fail("CUDA model: the GPU holds the K/V of another KvCache; a batch for this cache must start "
               "sequence {} at position 0 (it starts at {})",
               s, first);
      kv_owner_ = &cache;
    }
  }

  void ensure_buffers(int T, int n_out) {
    const ModelConfig& c = config_;
    const size_t t = static_cast<size_t>(std::max(T, 8));
    const size_t E = c.n_embd, F = c.n_ff, QD = c.q_dim(), KD = c.kv_dim();
    bool moved = false;
    if (static_cast<int>(t) > cap_T_) {
      cap_T_ = static_cast<int>(t);
      if (h_stage_) cudaFreeHost(h_stage_);
      check(cudaMallocHost(reinterpret_cast<void**>(&h_stage_), sizeof(int32_t) * 4 * t), "cudaMallocHost");
      moved = true;
    }
    moved |= d_in_.reserve(4 * static_cast<size_t>(cap_T_));
    moved |= x_.reserve(t * E);
    moved |= h_.reserve(t * E);
    moved |= tmp_.reserve(t * E);
    moved |= qkv_.reserve(t * (QD + 2 * KD));
    moved |= q_.reserve(t * QD);
    moved |= att_.reserve(t * QD);
    moved |= gu_.reserve(t * 2 * F);
    moved |= act_.reserve(t * F);
    moved |= part_.reserve(t * c.n_head * 32 * (c.head_dim + 2));
    moved |= gemv_scratch_.reserve(cuda::quant_act_bytes(max_cols_, cuda::kMaxGemvTokens));
    moved |= hq_.reserve(cuda::quant_act_bytes(E, cuda::kMaxGemvTokens));
    moved |= attq_.reserve(cuda::quant_act_bytes(QD, cuda::kMaxGemvTokens));
    moved |= actq_.reserve(cuda::quant_act_bytes(F, cuda::kMaxGemvTokens));
    const size_t no = static_cast<size_t>(std::max(n_out, 1));
    moved |= logits_.reserve(no * static_cast<size_t>(c.n_vocab));
    if (no * static_cast<size_t>(c.n_vocab) > h_logits_n_) {
      if (h_logits_) cudaFreeHost(h_logits_);
      h_logits_n_ = no * static_cast<size_t>(c.n_vocab);
      check(cudaMallocHost(reinterpret_cast<void**>(&h_logits_), h_logits_n_ * sizeof(float)), "cudaMallocHost");
    }
    if (T > cuda::kMaxGemvTokens) {  // the cuBLAS path's scratch (n_out <= T)
      moved |= wscratch_.reserve(max_q_elems_);
      moved |= xscratch_.reserve(t * static_cast<size_t>(max_cols_));
    }
    // the f16 queries of the long segments (the tensor-core prefill's input)
    if (std::any_of(segs_.begin(), segs_.end(), [&](const Segment& s) { return tc_prefill(s); }))
      q16_.reserve(t * QD);
    if (moved) drop_graph();
  }

  // Everything that could go wrong is checked before the cache is written (as llama.cpp).
  void validate(const Batch& b, const KvCache& cache) {
    const int64_t T = b.size();
    if (static_cast<int64_t>(b.pos.size()) != T || static_cast<int64_t>(b.seq.size()) != T ||
        static_cast<int64_t>(b.logits.size()) != T)
      fail("batch: {} tokens but {} positions, {} sequence ids, {} logit flags", T, b.pos.size(), b.seq.size(),
           b.logits.size());
    const KvCacheShape& cs = cache.shape();
    if (cs.n_layer != config_.n_layer || cs.n_head_kv != config_.n_head_kv || cs.head_dim != config_.head_dim)
      fail("KV cache shaped for {} layers x {} KV heads x {} dims, model has {} x {} x {}", cs.n_layer, cs.n_head_kv,
           cs.head_dim, config_.n_layer, config_.n_head_kv, config_.head_dim);
    last_pos_.clear();
    first_pos_.clear();
    for (int64_t t = 0; t < T; ++t) {
      if (b.tokens[t] < 0 || b.tokens[t] >= config_.n_vocab)
        fail("batch: token {} has id {}, outside the vocabulary [0, {})", t, b.tokens[t], config_.n_vocab);
      const int32_t s = b.seq[t], p = b.pos[t];
      auto it = last_pos_.find(s);
      if (it == last_pos_.end()) {
        cache.check_write(s, p, cache.length(s));
        last_pos_.emplace(s, p);
        first_pos_.emplace(s, p);
      } else {
        if (p != it->second + 1)
          fail("batch: token {} of sequence {} has position {}, expected {} (positions of a sequence must be "
               "consecutive)",
               t, s, p, it->second + 1);
        cache.check_write(s, p, p);
        it->second = p;
      }
    }
  }

  static constexpr int kShortRun = 8;  // a sequence's run of <= this many tokens: flash decoding
  // Whether segment s's attention goes through the tensor-core prefill: long runs over an
  // f16 cache at a head_dim it supports. Over a compressed cache every run goes through the
  // decode kernel, which dequantizes in registers (no dequantized copy of the cache exists).
  bool tc_prefill(const Segment& s) const {
    return s.n > kShortRun && (kv_type_ == KvType::f32 || kv_type_ == KvType::f16) &&
           cuda::prefill_attention_supported(config_.head_dim);
  }

  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  int n_sm_ = 132;
  bool use_graph_ = true;
  cudaGraphExec_t graph_exec_ = nullptr;

  DevMatrix embd_, output_;
  bool tied_ = false;
  std::vector<DevLayer> layers_;
  float* out_norm_ = nullptr;
  float* inv_freq_ = nullptr;
  cuda::AttnDims dims_;
  CudaModelInfo info_;
  int64_t max_cols_ = 0;
  size_t max_q_elems_ = 0;

  // GPU KV cache: [layer][seq][kv_head][pos] head vectors of kv_row_bytes_ (kv_type_'s layout)
  uint8_t *kv_k_ = nullptr, *kv_v_ = nullptr;
  size_t kv_layer_bytes_ = 0, kv_row_bytes_ = 0;
  KvType kv_alloc_type_ = KvType::f32;
  float* nsn2_codebook_ = nullptr;  // nsn2_codebook() on the GPU, uploaded when nsn2 is first set
  int64_t kv_seq_ = 0, kv_ctx_ = 0;
  const KvCache* kv_owner_ = nullptr;

  // activations and scratch
  int cap_T_ = 0;
  int32_t* h_stage_ = nullptr;
  float* h_logits_ = nullptr;
  size_t h_logits_n_ = 0;
  Buf<int32_t> d_in_;
  Buf<float> x_, h_, tmp_, qkv_, q_, att_, gu_, act_, part_, logits_;
  Buf<uint16_t> q16_, wscratch_, xscratch_;
  Buf<uint8_t> gemv_scratch_, hq_, attq_, actq_;  // quantized h, attention output, SwiGLU output
  std::vector<Segment> segs_;
  std::unordered_map<int32_t, int32_t> last_pos_, first_pos_;
};

}  // namespace

std::unique_ptr<Model> make_cuda_model(ModelSource src) {
  ModelConfig cfg = read_model_config(src);
  return std::make_unique<CudaModel>(std::move(src), std::move(cfg));
}

const CudaModelInfo* cuda_model_info(const Model& m) {
  const auto* c = dynamic_cast<const CudaModel*>(&m);
  return c ? &c->info() : nullptr;
}

#endif  // BRISK_CUDA

}  // namespace brisk
