#include "eval/passkey.h"

#include <algorithm>
#include <random>
#include <string>

#include "util/error.h"

namespace brisk {
namespace {

const char* const kFiller =
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const char* const kNames[] = {"apple", "river", "stone", "cloud", "tiger", "maple",
                              "ocean", "eagle", "amber", "cedar", "lemon", "frost"};

// Greedy continuation of `prompt` (fresh cache), n_new tokens.
std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, int64_t n_new) {
  KvCache cache(model.cache_shape(1, static_cast<int64_t>(prompt.size()) + n_new));
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<float> logits;
  Batch b;
  for (size_t s = 0; s < prompt.size(); s += 512) {
    b.clear();
    const size_t e = std::min(prompt.size(), s + 512);
    for (size_t i = s; i < e; ++i)
      b.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
    model.forward(b, cache, logits);
  }
  std::vector<int32_t> out;
  for (int64_t k = 0; k < n_new; ++k) {
    const int32_t next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.begin() + n_vocab) - logits.begin());
    out.push_back(next);
    if (k + 1 == n_new) break;
    b.clear();
    b.add(next, static_cast<int32_t>(prompt.size() + k), 0, true);
    model.forward(b, cache, logits);
  }
  return out;
}

std::string first_number(const std::string& s) {
  const size_t a = s.find_first_of("0123456789");
  if (a == std::string::npos) return "";
  const size_t e = s.find_first_not_of("0123456789", a);
  return s.substr(a, e == std::string::npos ? std::string::npos : e - a);
}

}  // namespace

PasskeyResult passkey_eval(Model& model, const Tokenizer& tok, const std::vector<int64_t>& lengths,
                           const std::vector<double>& depths, int64_t trials, int64_t n_keys,
                           uint64_t seed, const PasskeyAnswerer& answer) {
  if (trials < 1) fail("passkey: trials must be >= 1, got {}", trials);
  if (n_keys < 1 || n_keys > 12) fail("passkey: keys must be in [1, 12], got {}", n_keys);
  for (double d : depths)
    if (!(d >= 0 && d <= 1)) fail("passkey: depth {} outside [0, 1]", d);
  const std::vector<int32_t> filler = tok.encode(kFiller, false, false);
  std::mt19937_64 rng(seed);
  PasskeyResult r;
  for (int64_t len : lengths) {
    for (double depth : depths) {
      PasskeyCell cell{len, depth, 0, 0, {}};
      for (int64_t t = 0; t < trials; ++t) {
        // Keys and names; key 0 is asked for, the others are distractors at random depths.
        std::vector<std::string> keys, names;
        for (int64_t k = 0; k < n_keys; ++k) {
          keys.push_back(std::to_string(10000 + rng() % 90000));
          names.push_back(kNames[(t + k) % 12]);
        }
        auto needle = [&](int64_t k) {
          const std::string who = n_keys == 1 ? "" : " of " + names[k];
          return tok.encode(" The pass key" + who + " is " + keys[k] + ". Remember it. " +
                                keys[k] + " is the pass key" + who + ".",
                            false, false);
        };
        const std::string who = n_keys == 1 ? "" : " of " + names[0];
        const std::vector<int32_t> question =
            tok.encode(" What is the pass key" + who + "? The pass key" + who + " is", false, false);
        std::vector<std::pair<int64_t, std::vector<int32_t>>> inserts;  // (filler offset, tokens)
        int64_t fixed = static_cast<int64_t>(question.size());
        for (int64_t k = 0; k < n_keys; ++k) {
          inserts.push_back({0, needle(k)});
          fixed += static_cast<int64_t>(inserts.back().second.size());
        }
        const int64_t n_fill = len - fixed;
        if (n_fill < 32)
          fail("passkey: length {} leaves {} filler tokens (needs at least 32)", len, n_fill);
        inserts[0].first = static_cast<int64_t>(depth * n_fill);
        for (int64_t k = 1; k < n_keys; ++k) inserts[k].first = static_cast<int64_t>(rng() % n_fill);
        std::stable_sort(inserts.begin(), inserts.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        std::vector<int32_t> prompt;
        size_t next = 0;
        for (int64_t i = 0; i <= n_fill; ++i) {
          while (next < inserts.size() && inserts[next].first == i) {
            prompt.insert(prompt.end(), inserts[next].second.begin(), inserts[next].second.end());
            ++next;
          }
          if (i < n_fill) prompt.push_back(filler[static_cast<size_t>(i) % filler.size()]);
        }
        prompt.insert(prompt.end(), question.begin(), question.end());
        const std::vector<int32_t> got = answer ? answer(prompt, 8, r.trials + cell.trials) : greedy(model, prompt, 8);
        const bool ok = first_number(tok.decode(got)) == keys[0];
        cell.correct += ok;
        cell.outcomes += ok ? '1' : '0';
        ++cell.trials;
      }
      r.correct += cell.correct;
      r.trials += cell.trials;
      r.cells.push_back(cell);
    }
  }
  return r;
}

}  // namespace brisk
