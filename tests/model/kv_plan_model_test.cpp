// A per-layer KV plan that gives every layer the same option is the uniform setting: the
// logits match --kv-type T --kv-evict policy:keep bit for bit, through chunked prefill
// (eviction between chunks) and decode. A mixed plan changes only what it should.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <unistd.h>

#include "kv/kv_plan.h"
#include "model_test_util.h"
#include "util/error.h"

namespace brisk::test {
namespace {

// Prefill of 150 random tokens in chunks of 48, then 6 decode steps; every logit row.
std::vector<float> run(Model& m, KvType type, const std::string& evict) {
  m.set_kv_type(type);
  m.set_kv_evict(evict);
  KvCache cache(m.cache_shape(1, 160));
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(m.config().n_vocab - 1));
  std::vector<float> logits, all;
  const int64_t cuts[] = {0, 48, 96, 144, 150, 151, 152, 153, 154, 155, 156};
  for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
    Batch b;
    for (int64_t i = cuts[c]; i < cuts[c + 1]; ++i) b.add(d(rng), static_cast<int32_t>(i), 0, true);
    m.forward(b, cache, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  m.set_kv_type(KvType::f32);
  m.set_kv_evict("none");
  return all;
}

std::string write_plan(const KvPlan& p, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("brisk-" + std::to_string(::getpid()) + "-" + name + ".plan")).string();
  std::ofstream(path) << format_kv_plan(p);
  return path;
}

TEST(KvPlanModel, UniformPlanEqualsUniformSettingBitForBit) {
  Model& m = cached_model(source_dir() + "/models/brisk-tiny-q8_0.gguf");
  const size_t n_layer = static_cast<size_t>(m.config().n_layer);
  struct Case { KvType type; const char* policy; double keep; std::string uniform; };
  for (const Case& c : {Case{KvType::int8, "snapkv", 0.25, "snapkv:0.25"},
                        Case{KvType::int4r, "h2o", 0.5, "h2o:0.5"},
                        Case{KvType::f16, "snapkv", 1.0, "none"}}) {
    const std::string path = write_plan({c.policy, std::vector<KvLayerOption>(n_layer, {c.type, c.keep})}, "uniform");
    const std::vector<float> planned = run(m, KvType::f32, "plan:" + path);
    const std::vector<float> uniform = run(m, c.type, c.uniform);
    std::remove(path.c_str());
    ASSERT_EQ(planned.size(), uniform.size());
    EXPECT_TRUE(planned == uniform) << kv_type_name(c.type) << " " << c.uniform;
  }
}

TEST(KvPlanModel, MixedPlanDiffersAndBadPlansFailAtLoad) {
  Model& m = cached_model(source_dir() + "/models/brisk-tiny-q8_0.gguf");
  const size_t n_layer = static_cast<size_t>(m.config().n_layer);
  KvPlan p{"snapkv", std::vector<KvLayerOption>(n_layer, {KvType::int8, 0.25})};
  const std::string uniform_path = write_plan(p, "uniform");
  const std::vector<float> uniform = run(m, KvType::f32, "plan:" + uniform_path);
  p.layers[n_layer - 1] = {KvType::f16, 1};  // the last layer keeps everything
  const std::string path = write_plan(p, "mixed");
  const std::vector<float> mixed = run(m, KvType::f32, "plan:" + path);
  EXPECT_FALSE(mixed == uniform);
  std::remove(uniform_path.c_str());

  p.layers.pop_back();  // one layer short
  std::ofstream(path) << format_kv_plan(p);
  try {
    m.set_kv_evict("plan:" + path);
    ADD_FAILURE() << "a plan with too few layers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has " + std::to_string(n_layer - 1) + " layers"),
              std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  m.set_kv_evict("none");
}

}  // namespace
}  // namespace brisk::test
