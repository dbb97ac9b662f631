// bench_gpu: the GPU numbers of bench/gpu/run.sh.
//
//   bench_gpu OUT.md LABEL=MODEL [LABEL=MODEL ...]
//   bench_gpu --gemv OUT.md      (decode GEMV alone: the 8B shape's matrices, T = 1)
//   bench_gpu --kv OUT.md MODEL  (batch-1 decode per --kv-type and context length; env
//                                 BENCH_KV_TYPES="f16 int8 int4 nsn2", BENCH_KV_CTX="2048 8192")
// Env BENCH_DECODE_ONLY=1: batch-1 decode only; BENCH_PREFILL_ONLY="2048 8192": prefill
// tokens/s at those lengths only (both assume the ceilings instead of measuring them).
//
// Measures the two ceilings (device-to-device copy bandwidth, cuBLAS BF16 GEMM rate), then
// per model on --device cuda: batch-1 decode tokens/s with the bytes each step reads and
// their share of the copy bandwidth, 2,048-token prefill tokens/s with its MFU against the
// measured GEMM rate, and batched decode (1, 8, 32, 128 sequences). Prints a markdown table
// and writes it to OUT.md.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "model/cuda/cuda_model.h"
#include "tensor/quant.h"

using namespace brisk;

namespace {

void ck(cudaError_t e, const char* w) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error %s: %s\n", w, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes read + written per second by cudaMemcpy of `bytes` device to device (median of 20).
double copy_bandwidth(size_t bytes) {
  void *a, *b;
  ck(cudaMalloc(&a, bytes), "malloc");
  ck(cudaMalloc(&b, bytes), "malloc");
  ck(cudaMemset(a, 1, bytes), "memset");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<double> ts;
  for (int i = 0; i < 25; ++i) {
    cudaEventRecord(e0);
    ck(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice), "copy");
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 5) ts.push_back(ms * 1e-3);
  }
  cudaFree(a), cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / median(ts);
}

// FLOP/s of a bf16 x bf16 -> fp32-accumulated GEMM (m x n x k) on random data, median of 20.
double gemm_rate(int m, int n, int k) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  auto fill = [&](size_t count) {
    std::vector<uint16_t> h(count);
    for (auto& v : h) v = fp32_to_bf16(nd(rng));
    void* d;
    ck(cudaMalloc(&d, count * 2), "malloc");
    ck(cudaMemcpy(d, h.data(), count * 2, cudaMemcpyHostToDevice), "upload");
    return d;
  };
  void* A = fill(static_cast<size_t>(m) * k);
  void* B = fill(static_cast<size_t>(k) * n);
  void* C;
  ck(cudaMalloc(&C, static_cast<size_t>(m) * n * 2), "malloc");
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1, zero = 0;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<double> ts;
  for (int i = 0; i < 25; ++i) {
    cudaEventRecord(e0);
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_16BF, k, B, CUDA_R_16BF, k, &zero, C,
                 CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 5) ts.push_back(ms * 1e-3);
  }
  ck(cudaGetLastError(), "gemm");
  cublasDestroy(h);
  cudaFree(A), cudaFree(B), cudaFree(C);
  return 2.0 * m * n * k / median(ts);
}

std::vector<int32_t> random_ids(int n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = static_cast<int32_t>(1 + rng() % static_cast<uint64_t>(vocab - 1));
  return v;
}

// The batch-1 GEMV on random matrices of the 8B shape's four products, per weight type:
// time per product inside a CUDA graph of 64 back-to-back launches over rotating copies
// (>= 512 MB in all, so L2 holds none of them), as in the decode step; GB/s = the matrix's
// bytes / time. Random bytes: quants any value, scales finite.
void gemv_bench(const char* out_path) {
  cudaStream_t s;
  ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  std::mt19937_64 rng(3);
  const double bw = copy_bandwidth(size_t(1) << 30);
  std::ostringstream md;
  char line[256];
  std::snprintf(line, sizeof line, "GEMV T=1 (copy bandwidth %.0f GB/s, PDL %s)\n\n| type | rows x cols | us | GB/s | %% of copy |\n|---|---|---|---|---|\n",
                bw / 1e9, std::getenv("BRISK_CUDA_PDL") ? std::getenv("BRISK_CUDA_PDL") : "on");
  md << line;
  const struct { int64_t rows, cols; } shapes[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  for (cuda::WType t : {cuda::WType::Q4_0, cuda::WType::Q8_0, cuda::WType::BF16}) {
    for (const auto& sh : shapes) {
      cuda::DevMatrix proto;
      proto.type = t, proto.rows = sh.rows, proto.cols = sh.cols;
      const bool q = t != cuda::WType::BF16;
      const size_t sbytes = q ? static_cast<size_t>(sh.rows * (sh.cols / 32)) * 2 : 0;
      const size_t dbytes = proto.bytes() - sbytes;
      const int copies = static_cast<int>(std::max<size_t>(2, (size_t(512) << 20) / proto.bytes() + 1));
      std::vector<cuda::DevMatrix> ms(static_cast<size_t>(copies), proto);
      std::vector<uint16_t> hs(sbytes / 2);
      std::vector<uint64_t> hd(dbytes / 8);
      for (auto& m : ms) {
        for (auto& v : hd) v = rng();
        if (t == cuda::WType::BF16)  // finite bf16: clear the top exponent bit of each half-word
          for (auto& v : hd) v &= 0xBFFFBFFFBFFFBFFFull;
        for (auto& v : hs) v = fp32_to_fp16(1e-3f * static_cast<float>(1 + rng() % 1000));
        ck(cudaMalloc(&m.data, dbytes), "malloc");
        ck(cudaMemcpy(m.data, hd.data(), dbytes, cudaMemcpyHostToDevice), "upload");
        if (q) {
          ck(cudaMalloc(&m.scales, sbytes), "malloc");
          ck(cudaMemcpy(m.scales, hs.data(), sbytes, cudaMemcpyHostToDevice), "upload");
        }
      }
      void *xv, *yv, *scratch;
      ck(cudaMalloc(&xv, sizeof(float) * sh.cols), "malloc");
      ck(cudaMalloc(&yv, sizeof(float) * sh.rows), "malloc");
      float *x = static_cast<float*>(xv), *y = static_cast<float*>(yv);
      ck(cudaMalloc(&scratch, cuda::quant_act_bytes(sh.cols, 1)), "malloc");
      std::vector<float> hx(static_cast<size_t>(sh.cols));
      for (auto& v : hx) v = static_cast<float>(rng() % 2001) / 1000.f - 1.f;
      ck(cudaMemcpy(x, hx.data(), sizeof(float) * hx.size(), cudaMemcpyHostToDevice), "upload");
      cuda::QuantAct xq = cuda::quant_act_in(scratch, sh.cols, 1);
      // quantize once (as the producer kernels do in the model), then time the GEMV alone
      if (q) cuda::gemv(ms[0], x, sh.cols, 1, y, sh.rows, scratch, s);
      const int n_launch = 64;
      cudaGraph_t g;
      cudaGraphExec_t ge;
      ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
      for (int i = 0; i < n_launch; ++i)
        cuda::gemv(ms[static_cast<size_t>(i % copies)], x, sh.cols, 1, y, sh.rows, scratch, s, q ? &xq : nullptr);
      ck(cudaStreamEndCapture(s, &g), "capture");
      ck(cudaGraphInstantiate(&ge, g, 0), "instantiate");
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0), cudaEventCreate(&e1);
      std::vector<double> ts;
      for (int r = 0; r < 12; ++r) {
        cudaEventRecord(e0, s);
        ck(cudaGraphLaunch(ge, s), "graph");
        cudaEventRecord(e1, s);
        ck(cudaEventSynchronize(e1), "sync");
        float ms_;
        cudaEventElapsedTime(&ms_, e0, e1);
        if (r >= 2) ts.push_back(ms_ * 1e-3 / n_launch);
      }
      const double tt = median(ts);
      std::snprintf(line, sizeof line, "| %s | %lld x %lld | %.2f | %.0f | %.1f%% |\n", cuda::wtype_name(t),
                    static_cast<long long>(sh.rows), static_cast<long long>(sh.cols), tt * 1e6,
                    proto.bytes() / tt / 1e9, 100.0 * proto.bytes() / tt / bw);
      md << line;
      cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
      for (auto& m : ms) cuda::free_matrix(m);
      cudaFree(x), cudaFree(y), cudaFree(scratch);
    }
  }
  std::printf("\n%s", md.str().c_str());
  std::ofstream(out_path) << md.str();
}

}  // namespace

// Batch-1 decode tokens/s at long contexts for each KV codec: the context is prefilled in
// one batch, then 40 single-token steps (median of the last 32). KV bytes per position are
// what the GPU allocates (n_layer x 2 x n_kv x the codec's head-vector bytes), so a fixed
// KV memory holds that many positions (the GPU cache is exactly n_ctx x those bytes).
void kv_bench(const char* out_path, const std::string& path) {
  auto env = [](const char* k, const char* d) {
    const char* v = std::getenv(k);
    return std::string(v ? v : d);
  };
  std::vector<std::string> types;
  std::vector<int> ctxs;
  {
    std::istringstream a(env("BENCH_KV_TYPES", "f16 int8 int4 nsn2")), b(env("BENCH_KV_CTX", "2048 8192"));
    for (std::string w; a >> w;) types.push_back(w);
    for (int n; b >> n;) ctxs.push_back(n);
  }
  std::unique_ptr<Model> model = make_cuda_model(load_model_source(path));
  const ModelConfig& c = model->config();
  const double budget = 16.0 * (1ull << 30);
  std::ostringstream md;
  md << "| --kv-type | KV bytes/position | positions in 16 GiB of KV |";
  for (int n : ctxs) md << " decode tok/s at " << n << " |";
  md << "\n|---|---|---|";
  for (size_t i = 0; i < ctxs.size(); ++i) md << "---|";
  md << "\n";
  for (const std::string& t : types) {
    model->set_kv_type(parse_kv_type(t));
    const CudaModelInfo* info = cuda_model_info(*model);
    const double bpp = static_cast<double>(info->kv_bytes_per_position);
    md << "| " << t << " | " << info->kv_bytes_per_position << " | " << static_cast<long long>(budget / bpp) << " |";
    for (int n : ctxs) {
      KvCache cache(model->cache_shape(1, n + 48));
      Batch b;
      b.add_sequence(random_ids(n, c.n_vocab, 7), 0, 0);
      std::vector<float> logits;
      const double t0 = now_s();
      model->forward(b, cache, logits);
      const double pf = now_s() - t0;
      std::vector<double> steps;
      for (int i = 0; i < 40; ++i) {
        b.clear();
        b.add(static_cast<int32_t>(1 + (i * 7919) % (c.n_vocab - 1)), n + i, 0, true);
        const double s = now_s();
        model->forward(b, cache, logits);
        if (i >= 8) steps.push_back(now_s() - s);
      }
      const double step = median(steps);
      std::fprintf(stderr, "[bench_gpu kv] %s ctx %d: decode %.1f tok/s (step %.3f ms; KV read %.1f MB a step), "
                   "prefill %.2f s\n", t.c_str(), n, 1 / step, step * 1e3, bpp * (n + 24) / 1e6, pf);
      char buf[64];
      std::snprintf(buf, sizeof buf, " %.1f |", 1 / step);
      md << buf;
    }
    md << "\n";
  }
  std::printf("\n%s", md.str().c_str());
  std::ofstream(out_path) << md.str();
}

// Seconds of one n-token prefill into a fresh cache (logits of the last position), median
// of 3 after a warm-up.
double prefill_seconds(Model& model, int n) {
  std::vector<double> pf;
  for (int rep = 0; rep < 4; ++rep) {
    KvCache cache(model.cache_shape(1, n));
    Batch b;
    b.add_sequence(random_ids(n, model.config().n_vocab, 2 + rep), 0, 0);
    std::vector<float> logits;
    const double s = now_s();
    model.forward(b, cache, logits);
    if (rep > 0) pf.push_back(now_s() - s);
  }
  return median(pf);
}

// Counted FLOPs of an n-token prefill: 2 x matrix params x tokens + causal attention
// (QK^T and PV over the visible half) + the output head for one row.
double prefill_flops(const ModelConfig& c, int n) {
  const double E = c.n_embd, F = c.n_ff, QD = c.q_dim(), KD = c.kv_dim();
  const double mat_params = c.n_layer * (E * (QD + 2 * KD) + QD * E + 3 * E * F);
  const double attn_flops = c.n_layer * 4.0 * c.n_head * c.head_dim * (double(n) * (n + 1) / 2);
  return 2 * mat_params * n + attn_flops + 2 * E * c.n_vocab;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--gemv") {
    if (!cuda_available()) return 1;
    gemv_bench(argv[2]);
    return 0;
  }
  if (argc == 4 && std::string(argv[1]) == "--kv") {
    if (!cuda_available()) return 1;
    kv_bench(argv[2], argv[3]);
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_gpu OUT.md LABEL=MODEL ...\n");
    return 2;
  }
  if (!cuda_available()) {
    std::fprintf(stderr, "bench_gpu: %s\n", cuda_unavailable_reason().c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::ostringstream md;
  char line[1024];

  // BENCH_DECODE_ONLY=1: batch-1 decode only (profiling runs, graph vs eager comparisons).
  const char* dov = std::getenv("BENCH_DECODE_ONLY");
  const bool decode_only = dov && std::string(dov) == "1";
  // BENCH_PREFILL_ONLY="2048 8192": prefill tokens/s at these lengths only (A/B runs).
  const char* pov = std::getenv("BENCH_PREFILL_ONLY");
  std::vector<int> prefill_lens;
  if (pov) {
    std::istringstream is(pov);
    for (int n; is >> n;) prefill_lens.push_back(n);
  }
  const bool prefill_only = !prefill_lens.empty();
  const bool quick = decode_only || prefill_only;  // the ceilings assumed, not measured
  const double bw = quick ? 4.2e12 : copy_bandwidth(size_t(1) << 30);
  const double peak = quick ? 7.6e14 : gemm_rate(8192, 8192, 8192);
  const double peak_prefill_shape = quick ? 0 : gemm_rate(14336, 2048, 4096);
  std::snprintf(line, sizeof line,
                "Device: %s, %d SMs. Ceilings measured here: device-to-device copy %.0f GB/s (cudaMemcpy of 1 GiB, "
                "read + write, median of 20); cuBLAS BF16 GEMM %.0f TFLOP/s at 8192^3 and %.0f TFLOP/s at "
                "14336x2048x4096 (fp32 accumulation, random data, median of 20).\n\n",
                prop.name, prop.multiProcessorCount, bw / 1e9, peak / 1e12, peak_prefill_shape / 1e12);
  md << line;
  md << "| model | weights on GPU | decode tok/s (batch 1) | bytes/token | % of copy BW | prefill 2048 tok/s | "
        "prefill MFU | batched decode tok/s (1 / 8 / 32 / 128 seqs) |\n";
  md << "|---|---|---|---|---|---|---|---|\n";

  for (int a = 2; a < argc; ++a) {
    std::string spec = argv[a];
    const size_t eq = spec.find('=');
    const std::string label = spec.substr(0, eq), path = spec.substr(eq + 1);
    std::fprintf(stderr, "[bench_gpu] loading %s (%s)\n", label.c_str(), path.c_str());
    double t0 = now_s();
    std::unique_ptr<Model> model = make_cuda_model(load_model_source(path));
    std::fprintf(stderr, "[bench_gpu] loaded in %.1f s\n", now_s() - t0);
    const ModelConfig& c = model->config();
    const CudaModelInfo* info = cuda_model_info(*model);
    if (prefill_only) {
      for (int n : prefill_lens) {
        const double t = prefill_seconds(*model, n);
        std::fprintf(stderr, "[bench_gpu] %s prefill only %d: %.0f tok/s (%.2f ms, MFU %.1f%% of %.0f TFLOP/s)\n",
                     label.c_str(), n, n / t, t * 1e3, 100 * prefill_flops(c, n) / t / peak, peak / 1e12);
      }
      continue;
    }

    // batch-1 decode: 32-token prompt, then 256 steps (each step: forward + logits copy)
    const int n_prompt = 32, n_gen = decode_only ? 40 : 256;
    std::vector<double> steps;
    {
      KvCache cache(model->cache_shape(1, n_prompt + n_gen + 8));
      Batch b;
      b.add_sequence(random_ids(n_prompt, c.n_vocab, 1), 0, 0);
      std::vector<float> logits;
      model->forward(b, cache, logits);
      for (int i = 0; i < n_gen; ++i) {
        b.clear();
        b.add(static_cast<int32_t>(1 + (i * 7919) % (c.n_vocab - 1)), n_prompt + i, 0, true);
        const double s = now_s();
        model->forward(b, cache, logits);
        if (i >= 8) steps.push_back(now_s() - s);
      }
    }
    const double step = median(steps);
    const double avg_ctx = n_prompt + n_gen / 2.0;
    const double bytes = static_cast<double>(info->weight_bytes_per_token) + avg_ctx * info->kv_bytes_per_position;
    const double tps = 1.0 / step;
    if (decode_only) {
      std::fprintf(stderr, "[bench_gpu] %s decode only: %.1f tok/s (step %.3f ms), %.1f%% of 4.2 TB/s\n", label.c_str(),
                   tps, step * 1e3, 100.0 * bytes * tps / bw);
      continue;
    }

    // prefill: 2,048 tokens in one batch, logits of the last
    const int n_pf = 2048;
    const double pf_t = prefill_seconds(*model, n_pf);
    const double flops = prefill_flops(c, n_pf);
    const double mfu = flops / pf_t / peak;

    // batched decode: B sequences of 32-token contexts, one token each per step
    std::string batched;
    for (int B : {1, 8, 32, 128}) {
      KvCache cache(model->cache_shape(B, 64 + 40));
      Batch b;
      for (int s = 0; s < B; ++s) b.add_sequence(random_ids(32, c.n_vocab, 100 + s), 0, s);
      std::vector<float> logits;
      model->forward(b, cache, logits);
      std::vector<double> ts;
      for (int i = 0; i < 24; ++i) {
        b.clear();
        for (int s = 0; s < B; ++s) b.add(static_cast<int32_t>(1 + (s * 31 + i) % (c.n_vocab - 1)), 32 + i, s, true);
        const double st = now_s();
        model->forward(b, cache, logits);
        if (i >= 4) ts.push_back(now_s() - st);
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%.0f", batched.empty() ? "" : " / ", B / median(ts));
      batched += buf;
    }

    std::snprintf(line, sizeof line, "| %s | %.2f GB | %.1f | %.2f GB | %.1f%% | %.0f | %.1f%% | %s |\n", label.c_str(),
                  info->device_bytes / 1e9, tps, bytes / 1e9, 100.0 * bytes * tps / bw, n_pf / pf_t, 100 * mfu,
                  batched.c_str());
    md << line;
    std::fprintf(stderr, "%s", line);
    std::fprintf(stderr,
                 "[bench_gpu] %s: decode step median %.3f ms (mean over %zu steps %.3f ms); prefill %.1f ms, %.1f "
                 "TFLOP counted\n",
                 label.c_str(), step * 1e3, steps.size(),
                 1e3 * [&] {
                   double s = 0;
                   for (double v : steps) s += v;
                   return s / static_cast<double>(steps.size());
                 }(),
                 pf_t * 1e3, flops / 1e12);
  }
  md << "\nDecode: 32-token prompt, then 256 single-token steps (median step, host wall clock, logits copied back "
        "each step); bytes/token = weight bytes read per step (every matrix once + one embedding row) + K/V bytes "
        "at the mean context (fp16). Prefill: one 2,048-token batch into a fresh cache (median of 3 after a warm-up); "
        "MFU = counted FLOPs (2 x matrix params x tokens + causal attention) / time / the 8192^3 cuBLAS rate. "
        "Batched decode: B sequences of 32-52 tokens, one token each per step (B > 8 goes through cuBLAS).\n";
  std::printf("\n%s", md.str().c_str());
  std::ofstream(argv[1]) << md.str();
  return 0;
}
