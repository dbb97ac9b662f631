// libFuzzer target: wrong model metadata or mislabeled tensors must end in a brisk::Error
// from make_model or the forward pass, or in a model whose forward pass runs; never a
// crash, an out-of-bounds access or a runaway allocation. The input edits one of the tiny
// random-weight models of tests/fixtures/arch (loaded once): its first byte picks the model,
// then each 9-byte record either sets one metadata key to another value or swaps the names
// of two tensors (a GGUF's tensors always fit its file, so views stay inside their buffers).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "format/model_source.h"
#include "fuzz_fixtures.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "util/error.h"

namespace {

const std::vector<brisk::ModelSource>& sources() {
  static const std::vector<brisk::ModelSource> s = [] {
    std::vector<brisk::ModelSource> v;
    for (const char* arch : {"llama3", "qwen2", "qwen3", "mistral"}) {
      std::string dir = fuzz::fixture(std::string("arch/") + arch);
      v.push_back(brisk::load_model_source(dir));
    }
    return v;
  }();
  return s;
}

// Another value of the same kind as `old`: small and large integers, odd floats, other
// architecture names.
brisk::GgufValue mutate(const brisk::GgufValue& old, uint8_t how, int64_t raw) {
  using brisk::GgufType;
  using V = brisk::GgufValue;
  const int64_t small = raw % 70 - 5;  // -5..64: zero, negatives, off-by-one sizes
  switch (old.type) {
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: {
      float f;
      std::memcpy(&f, &raw, sizeof f);  // any bit pattern: NaN, inf, denormals, 0
      return V::of_f32(how & 1 ? f : static_cast<float>(small));
    }
    case GgufType::STRING: {
      static const char* names[] = {"llama", "qwen2", "qwen3", "mistral", "gpt2", ""};
      return V::of_str(names[static_cast<uint64_t>(raw) % 6]);
    }
    case GgufType::BOOL:
      return V::of_bool(raw & 1);
    case GgufType::ARRAY:
      return how & 1 ? V::of_f32_array({}) : V::of_i32_array({static_cast<int32_t>(small)});
    default:
      return how & 1 ? V::of_u64(static_cast<uint64_t>(raw)) : V::of_i32(static_cast<int32_t>(small));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& all = sources();
  brisk::ModelSource src = all[data[0] % all.size()];
  std::vector<std::string> keys;
  for (const auto& [k, v] : src.meta.kv) keys.push_back(k);
  for (size_t at = 1; at + 9 <= size; at += 9) {
    const uint8_t op = data[at];
    int64_t raw;
    std::memcpy(&raw, data + at + 1, sizeof raw);
    if (op < 224) {
      const std::string& key = keys[op % keys.size()];
      src.meta.set(key, mutate(src.meta.kv[key], op >> 5, raw));
    } else {
      const size_t n = src.tensors.size(), a = static_cast<uint64_t>(raw) % n, b = (static_cast<uint64_t>(raw) >> 32) % n;
      std::swap(src.tensors[a].name, src.tensors[b].name);
    }
  }
  try {
    auto model = brisk::make_model(std::move(src));
    brisk::KvCache cache(model->cache_shape(1, 8));
    brisk::Batch batch;
    batch.add_sequence({1, 2, 3}, 0, 0, /*all_logits=*/true);
    std::vector<float> logits;
    model->forward(batch, cache, logits);
    if (static_cast<int64_t>(logits.size()) != 3 * model->n_logits()) __builtin_trap();
  } catch (const brisk::Error&) {
  }
  return 0;
}
