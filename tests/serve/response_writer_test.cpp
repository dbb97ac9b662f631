// serve/openai_api.h ResponseWriter::sse: a plain content chunk is its stream's frame with the
// text spliced in (not built through json objects). Every frame must still be the bytes
// nlohmann's dump writes for that object (sorted keys, its escaping, invalid UTF-8 replaced),
// with the chunk's fields as OpenAI's streaming API has them.
#include "serve/openai_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/loaded_model.h"

namespace brisk::serve {
namespace {

using json = nlohmann::json;

std::vector<std::string> frames(const std::string& sse) {
  std::vector<std::string> out;
  for (size_t at = 0; at < sse.size();) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "unterminated frame";
    if (end == std::string::npos) break;
    EXPECT_EQ(sse.compare(at, 6, "data: "), 0) << sse.substr(at, end - at);
    out.push_back(sse.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return out;
}

TEST(ResponseWriter, ContentChunksAreTheJsonDumpOfTheChunk) {
  static LoadedModel lm = load_for_generation(BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano");
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"Hello", "Hello"},
      {"quote \" backslash \\ slash / newline \n tab \t bell \x07 nul-free", ""},
      {"caf\xC3\xA9 \xF0\x9F\x98\x80 brisk-chunk-text", ""},
      {"bad \xFF\xFE utf-8", "bad \xEF\xBF\xBD\xEF\xBF\xBD utf-8"},
  };
  for (Endpoint endpoint : {Endpoint::kChat, Endpoint::kCompletions}) {
    for (bool usage : {false, true}) {
      ParsedRequest req;
      req.endpoint = endpoint;
      req.stream = true;
      req.include_usage = usage;
      req.model = usage ? "brisk-chunk-text" : "brisk-nano \"quoted\"";  // the placeholder, too
      ResponseWriter w(req, *lm.tokenizer, "", 1700000000);
      const bool chat = endpoint == Endpoint::kChat;
      std::vector<std::string> all;
      for (size_t i = 0; i < texts.size(); ++i) {
        StreamEvent ev;
        ev.text = texts[i].first;
        ev.tokens = {static_cast<int32_t>(i + 5)};
        for (std::string& f : frames(w.sse(ev))) all.push_back(std::move(f));
      }
      ASSERT_EQ(all.size(), texts.size() + (chat ? 1 : 0));  // chat: the role chunk first
      for (size_t i = 0; i < all.size(); ++i) {
        const json j = json::parse(all[i]);
        EXPECT_EQ(all[i], j.dump(-1, ' ', false, json::error_handler_t::replace)) << "not dump's bytes";
        EXPECT_EQ(j.at("id"), w.id());
        EXPECT_EQ(j.at("object"), chat ? "chat.completion.chunk" : "text_completion");
        EXPECT_EQ(j.at("created"), 1700000000);
        EXPECT_EQ(j.at("model"), req.model);
        EXPECT_TRUE(j.at("system_fingerprint").is_null());
        EXPECT_EQ(j.contains("usage"), usage);
        if (usage) EXPECT_TRUE(j.at("usage").is_null());
        ASSERT_EQ(j.at("choices").size(), 1u);
        const json& c = j.at("choices")[0];
        EXPECT_EQ(c.at("index"), 0);
        EXPECT_TRUE(c.at("logprobs").is_null());
        EXPECT_TRUE(c.at("finish_reason").is_null());
        if (chat && i == 0) {
          EXPECT_EQ(c.at("delta").at("role"), "assistant");
          continue;
        }
        const auto& [sent, replaced] = texts[i - (chat ? 1 : 0)];
        const std::string want = replaced.empty() ? sent : replaced;
        EXPECT_EQ(chat ? c.at("delta").at("content") : c.at("text"), want);
        EXPECT_EQ(chat ? c.at("delta").size() : c.size(), chat ? 1u : 4u);
      }
    }
  }
}

}  // namespace
}  // namespace brisk::serve
