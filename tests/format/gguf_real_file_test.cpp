// The bundled real model file (models/brisk-tiny-q8_0.gguf, converted by llama.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "format/gguf.h"

namespace brisk {
namespace {

const std::string kTiny = BRISK_SOURCE_DIR "/models/brisk-tiny-q8_0.gguf";

TEST(GgufRealFile, BriskTinyQ8_0) {
  if (!std::filesystem::exists(kTiny)) GTEST_SKIP() << kTiny << " not present";
  auto f = GgufFile::open(kTiny);
  const GgufMetadata& m = f->metadata();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(m.get_string("general.architecture"), "llama");
  EXPECT_EQ(m.get_int("llama.block_count"), 8);
  EXPECT_EQ(m.get_int("llama.embedding_length"), 384);
  EXPECT_EQ(m.get_int("llama.feed_forward_length"), 1024);
  EXPECT_EQ(m.get_int("llama.attention.head_count"), 6);
  EXPECT_EQ(m.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_NEAR(m.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(m.get_string_array("tokenizer.ggml.tokens").size(), 16384u);
  // token_embd + output_norm + 9 tensors per block; tied embeddings: no output.weight
  EXPECT_EQ(f->tensors().size(), 2u + 8u * 9u);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
  const TensorView* e = f->find_tensor("token_embd.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, DType::Q8_0);
  EXPECT_EQ(e->n_dims, 2);
  EXPECT_EQ(e->ne[0], 384);
  EXPECT_EQ(e->ne[1], 16384);
  EXPECT_EQ(e->nbytes(), 16384u * 12 * 34);
  const TensorView* n = f->find_tensor("blk.7.ffn_norm.weight");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->type, DType::F32);
  EXPECT_EQ(n->n_dims, 1);
  EXPECT_EQ(n->ne[0], 384);
  // views point into the mapping, aligned inside the data section
  auto base = f->mapping()->data();
  for (const auto& t : f->tensors()) {
    auto off = static_cast<const uint8_t*>(t.data) - base;
    EXPECT_GE(static_cast<size_t>(off), f->data_offset()) << t.name;
    EXPECT_EQ((off - f->data_offset()) % f->alignment(), 0u) << t.name;
    EXPECT_LE(off + t.nbytes(), f->mapping()->size()) << t.name;
  }
}

TEST(GgufRealFile, MissingFileNamesPath) {
  try {
    GgufFile::open("/nonexistent/x.gguf");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace brisk

namespace brisk {
namespace {

// Rewriting the llama.cpp-made file with write_gguf gives the same tensor layout (each
// tensor at the running offset padded to the alignment), the layout ggml checks when it
// loads a file, and the same bytes and metadata.
TEST(GgufRealFile, RewriteKeepsLlamaCppLayout) {
  if (!std::filesystem::exists(kTiny)) GTEST_SKIP() << kTiny << " not present";
  auto f = GgufFile::open(kTiny);
  std::string out = (std::filesystem::temp_directory_path() /
                     ("brisk-rewrite-" + std::to_string(::getpid()) + ".gguf")).string();
  write_gguf(out, f->metadata(), f->tensors());
  auto g = GgufFile::open(out);
  std::filesystem::remove(out);
  ASSERT_EQ(g->tensors().size(), f->tensors().size());
  EXPECT_EQ(g->metadata().kv.size(), f->metadata().kv.size());
  EXPECT_EQ(g->metadata().get_string_array("tokenizer.ggml.merges"),
            f->metadata().get_string_array("tokenizer.ggml.merges"));
  EXPECT_EQ(g->metadata().get_int_array("tokenizer.ggml.token_type"),
            f->metadata().get_int_array("tokenizer.ggml.token_type"));
  for (size_t k = 0; k < f->tensors().size(); ++k) {
    const TensorView& a = f->tensors()[k];
    const TensorView& b = g->tensors()[k];
    auto off = [](const GgufFile& file, const TensorView& t) {
      return static_cast<const uint8_t*>(t.data) - file.mapping()->data() -
             static_cast<ptrdiff_t>(file.data_offset());
    };
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(off(*f, a), off(*g, b)) << a.name;
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << a.name;
  }
  EXPECT_EQ(g->mapping()->size() - g->data_offset(), f->mapping()->size() - f->data_offset());
}

}  // namespace
}  // namespace brisk

namespace brisk {
namespace {

// llama.cpp's vocab-only test files: real GGUFs with every common metadata type.
TEST(GgufRealFile, VocabFixtures) {
  const std::pair<const char*, size_t> files[] = {{"deepseek-coder", 32256}, {"falcon", 65024},
                                                  {"gpt-2", 50257}, {"llama-spm", 32000}};
  for (auto [name, n_vocab] : files) {
    std::string p = std::string(BRISK_SOURCE_DIR "/tests/fixtures/vocab/ggml-vocab-") + name + ".gguf";
    if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " not present";
    auto f = GgufFile::open(p);
    EXPECT_EQ(f->metadata().get_string_array("tokenizer.ggml.tokens").size(), n_vocab) << name;
    EXPECT_TRUE(f->metadata().has("tokenizer.ggml.model")) << name;
    EXPECT_TRUE(f->tensors().empty()) << name;
  }
}

}  // namespace
}  // namespace brisk
