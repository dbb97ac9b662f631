// ModelConfig from metadata, and clear errors (not crashes) for broken models and batches.
// Broken models are made by editing a loaded ModelSource.
#include <sys/resource.h>

#include "model_test_util.h"
#include "model/weights.h"
#include "util/error.h"

namespace brisk::test {
namespace {

ModelSource nano_source() {
  static const ModelSource src = load_model_source(nano_dir());
  return src;  // a copy the test may edit; mappings are shared
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// The message of the brisk::Error thrown by f ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, NanoHfFolder) {
  const ModelConfig c = read_model_config(nano_source());  // values from its config.json
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.n_embd, 256);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 704);
  EXPECT_EQ(c.n_vocab, 16384);
  EXPECT_EQ(c.n_ctx_train, 2048);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  EXPECT_TRUE(c.rope_neox);  // HF checkpoints rotate halves
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
}

TEST(ModelConfig, TinyGgufUsesInterleavedRope) {
  const std::string path = shared_models() + "/brisk-tiny/brisk-tiny-f16.gguf";
  if (!exists(path)) GTEST_SKIP() << "shared model asset absent (fresh clone?): " << path;
  const ModelConfig c = read_model_config(load_model_source(path));  // README's table
  EXPECT_EQ(c.n_layer, 8);
  EXPECT_EQ(c.n_embd, 384);
  EXPECT_EQ(c.n_head, 6);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 1024);
  EXPECT_EQ(c.n_vocab, 16384);
  EXPECT_FALSE(c.rope_neox);  // converter permuted q/k rows to interleaved pairs
}

// The same numbers under another architecture name switch on its features.
TEST(ModelConfig, QwenFamilies) {
  for (const char* arch : {"qwen2", "qwen3"}) {
    ModelSource src = nano_source();
    GgufMetadata renamed;
    for (const auto& [k, v] : src.meta.kv) {
      std::string key = k;
      if (key.rfind("llama.", 0) == 0) key = std::string(arch) + key.substr(5);
      renamed.set(key, v);
    }
    renamed.set("general.architecture", GgufValue::of_str(arch));
    src.meta = renamed;
    src.hf_layout = false;  // as from a GGUF file: qwen is still NEOX there
    const ModelConfig c = read_model_config(src);
    EXPECT_TRUE(c.rope_neox) << arch;
    EXPECT_EQ(c.qkv_bias, std::string(arch) == "qwen2");
    EXPECT_EQ(c.qk_norm, std::string(arch) == "qwen3");
    EXPECT_EQ(c.n_ff, 704);
    // nano has neither biases nor q/k norms: loading the weights must name what is missing
    const std::string want = std::string(arch) == "qwen2" ? "blk.0.attn_q.bias" : "blk.0.attn_q_norm.weight";
    EXPECT_NE(error_of([&] { load_weights(src, c); }).find(want), std::string::npos) << arch;
  }
}

TEST(ModelErrors, UnknownArchitecture) {
  ModelSource src = nano_source();
  src.meta.set("general.architecture", GgufValue::of_str("gptj"));
  const std::string e = error_of([&] { make_model(src); });
  EXPECT_NE(e.find("unsupported model architecture 'gptj'"), std::string::npos) << e;
}

TEST(ModelErrors, MissingTensor) {
  ModelSource src = nano_source();
  std::erase_if(src.tensors, [](const TensorView& t) { return t.name == "blk.1.ffn_up.weight"; });
  const std::string e = error_of([&] { make_model(src); });
  EXPECT_NE(e.find("has no tensor 'blk.1.ffn_up.weight'"), std::string::npos) << e;
}

TEST(ModelErrors, MissingMetadata) {
  ModelSource src = nano_source();
  src.meta.kv.erase("llama.block_count");
  const std::string e = error_of([&] { make_model(src); });
  EXPECT_NE(e.find("llama.block_count"), std::string::npos) << e;
}

// Values past any real model (found by fuzz/fuzz_model_metadata.cpp): head_count x key_length
// overflowed int64 (UBSan), block_count 10^7 allocated every layer before the first missing
// tensor, eps and freq_base went through to NaN logits.
TEST(ModelErrors, AbsurdSizesAndValues) {
  struct Case {
    const char* key;
    GgufValue value;
    const char* message;
  } cases[] = {
      {"llama.feed_forward_length", GgufValue::of_u64(uint64_t{1} << 40),
       "llama.feed_forward_length is 1099511627776, expected 1..16777216"},
      {"llama.attention.head_count", GgufValue::of_u64(uint64_t{1} << 33),
       "llama.attention.head_count is 8589934592, expected 1..16777216"},
      {"llama.context_length", GgufValue::of_i32(-1), "llama.context_length is -1, expected 0 (unknown)"},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::of_f32(-1e-5f),
       "llama.attention.layer_norm_rms_epsilon is -1e-05, expected 0 <= eps < 1"},
      {"llama.rope.freq_base", GgufValue::of_f32(0.f), "llama.rope.freq_base is 0, expected a positive finite number"},
      {"llama.block_count", GgufValue::of_u32(10'000'000), "has no tensor 'blk.4.attn_norm.weight'"},
  };
  for (const Case& c : cases) {
    ModelSource src = nano_source();
    src.meta.set(c.key, c.value);
    const long peak_kb = peak_rss_kb();
    const std::string e = error_of([&] { make_model(src); });
    EXPECT_NE(e.find(c.message), std::string::npos) << c.key << ": " << e;
    // 10^7 layers' weight records would be gigabytes; failing at layer 4 costs nothing
    EXPECT_LT(peak_rss_kb() - peak_kb, 100 * 1024) << c.key;
  }
}

TEST(ModelErrors, WrongShape) {
  ModelSource src = nano_source();
  for (TensorView& t : src.tensors)
    if (t.name == "blk.2.ffn_up.weight") t.ne[1] = 700;  // a smaller view: stays in bounds
  const std::string e = error_of([&] { make_model(src); });
  EXPECT_NE(e.find("tensor 'blk.2.ffn_up.weight' has shape [256, 700], expected [256, 704]"),
            std::string::npos)
      << e;
}

TEST(ModelErrors, UnsupportedDtype) {
  ModelSource src = nano_source();
  for (TensorView& t : src.tensors)
    if (t.name == "blk.0.attn_q.weight") t.type = DType::Q4_1;  // geometry known, no kernels
  ASSERT_FALSE(info(DType::Q4_1).supported);
  const std::string e = error_of([&] { make_model(src); });
  EXPECT_NE(e.find("tensor 'blk.0.attn_q.weight' has dtype q4_1"), std::string::npos) << e;
}

TEST(ModelErrors, PromptLongerThanCache) {
  Model& m = cached_model(nano_dir());
  KvCache cache(m.cache_shape(1, 16));
  Batch b;
  b.add_sequence(std::vector<int32_t>(20, 5), 0, 0);
  std::vector<float> logits;
  const std::string e = error_of([&] { m.forward(b, cache, logits); });
  EXPECT_NE(e.find("exceeds the cache capacity of 16"), std::string::npos) << e;
  EXPECT_EQ(cache.length(0), 0);  // rejected before anything was written

  // Filling it exactly works; one more decode step is refused.
  b.clear();
  b.add_sequence(std::vector<int32_t>(16, 5), 0, 0);
  m.forward(b, cache, logits);
  EXPECT_EQ(cache.length(0), 16);
  b.clear();
  b.add(5, 16, 0, true);
  EXPECT_THROW(m.forward(b, cache, logits), Error);
  EXPECT_EQ(cache.length(0), 16);
}

TEST(ModelErrors, BadBatches) {
  Model& m = cached_model(nano_dir());
  KvCache cache(m.cache_shape(2, 16));
  std::vector<float> logits;
  auto run = [&](const Batch& b) { return error_of([&] { m.forward(b, cache, logits); }); };
  Batch b;
  b.add(16384, 0, 0, true);
  EXPECT_NE(run(b).find("outside the vocabulary"), std::string::npos);
  b.clear();
  b.add(1, 3, 0, true);  // positions 0..2 never written
  EXPECT_NE(run(b).find("hole"), std::string::npos);
  b.clear();
  b.add(1, 0, 0, false);
  b.add(1, 2, 0, true);
  EXPECT_NE(run(b).find("consecutive"), std::string::npos);
  b.clear();
  b.add(1, 0, 2, true);
  EXPECT_NE(run(b).find("slot 2 out of range"), std::string::npos);
  KvCache other({3, 1, 16, 2, 64});
  b.clear();
  b.add(1, 0, 0, true);
  EXPECT_NE(error_of([&] { m.forward(b, other, logits); }).find("KV cache shaped"), std::string::npos);
}

}  // namespace
}  // namespace brisk::test
