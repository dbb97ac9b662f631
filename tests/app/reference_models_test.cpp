// The three project models against transformers' float32 reference.json, through the
// GGUF that `brisk convert` writes from each Hugging Face folder (test_model covers the
// shipped GGUF files and the HF folders of nano and tiny), and brisk-small's HF folder.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "model/model.h"

namespace brisk::test {
namespace {

using nlohmann::json;

void check_against_reference(Model& model, const json& ref, const std::string& label) {
  for (const json& p : ref["prompts"]) {
    std::vector<int32_t> ids = p["prompt_ids"].get<std::vector<int32_t>>();
    KvCache cache(model.cache_shape(1, static_cast<int64_t>(ids.size()) + 40));
    Batch batch;
    batch.add_sequence(ids, 0, 0);
    std::vector<float> logits;
    model.forward(batch, cache, logits);
    const json& top = p["last_prompt_position_top20"];
    for (size_t i = 0; i < top["ids"].size(); ++i) {
      int id = top["ids"][i].get<int>();
      double want = top["logits"][i].get<double>();
      EXPECT_NEAR(logits[id], want, 1e-3 * std::max(1.0, std::abs(want)))
          << label << " " << p["name"] << " top-20 #" << i;
    }
    std::vector<int32_t> out;
    for (int i = 0; i < 32; ++i) {
      int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      batch.clear();
      batch.add(next, static_cast<int32_t>(ids.size() + i), 0, true);
      model.forward(batch, cache, logits);
    }
    EXPECT_EQ(out, p["greedy_ids"].get<std::vector<int32_t>>()) << label << " " << p["name"];
  }
}

class ReferenceModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceModel, ConvertedF16GgufMatchesTransformers) {
  std::string dir = model_dir(GetParam());
  if (dir.empty()) GTEST_SKIP() << "../shared/models/" << GetParam() << " not present";
  std::string out = temp_path(GetParam() + "-f16.gguf");
  CliResult r = run_brisk({"convert", dir, out, "--type", "f16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json ref = json::parse(std::ifstream(dir + "/reference.json"));
  auto model = load_model(out);
  check_against_reference(*model, ref, GetParam() + " converted f16");
}

TEST(ReferenceModel, SmallHfFolderMatchesTransformers) {
  std::string dir = model_dir("brisk-small");
  if (dir.empty()) GTEST_SKIP() << "../shared/models/brisk-small not present";
  json ref = json::parse(std::ifstream(dir + "/reference.json"));
  auto model = load_model(dir);
  check_against_reference(*model, ref, "brisk-small HF");
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceModel,
                         ::testing::Values("brisk-nano", "brisk-tiny", "brisk-small"));

}  // namespace
}  // namespace brisk::test
