#include "tokenizer/chat_template.h"

#include "util/error.h"

namespace brisk {

namespace {

bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

std::string trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

std::string render_chatml(const std::vector<ChatMessage>& msgs, bool prompt) {
  std::string out;
  for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& msgs, bool prompt) {
  std::string out;
  for (const auto& m : msgs)  // the official template trims every message
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  if (prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// [INST] turns. The system message has no turn of its own: it goes in front of the
// next user message, wrapped in <<SYS>> for Llama 2 and as a plain paragraph for
// Mistral (whose templates have no system marker).
std::string render_inst(const std::vector<ChatMessage>& msgs, bool llama2) {
  std::string out, system;
  bool first_turn = true;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n") + m.content;
    } else if (m.role == "user") {
      if (!first_turn && llama2) out += "<s>";
      out += "[INST] ";
      if (!system.empty())
        out += llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" : system + "\n\n";
      system.clear();
      out += m.content + " [/INST]";
      first_turn = false;
    } else if (m.role == "assistant") {
      out += " " + m.content + (llama2 ? " </s>" : "</s>");
    } else {
      fail("chat template {}: role '{}' is not supported (only system, user, assistant)",
           llama2 ? "llama2" : "mistral", m.role);
    }
  }
  return out;
}

}  // namespace

std::string_view chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::kChatML: return "chatml";
    case ChatFamily::kLlama3: return "llama3";
    case ChatFamily::kLlama2: return "llama2";
    case ChatFamily::kMistral: return "mistral";
  }
  return "?";
}

ChatFamily detect_chat_family(std::string_view t) {
  if (t.empty() || t == "chatml") return ChatFamily::kChatML;
  if (t == "llama3" || t == "llama-3") return ChatFamily::kLlama3;
  if (t == "llama2" || t == "llama-2") return ChatFamily::kLlama2;
  if (t == "mistral") return ChatFamily::kMistral;
  if (has(t, "<|im_start|>")) return ChatFamily::kChatML;
  if (has(t, "<|start_header_id|>")) return ChatFamily::kLlama3;
  if (has(t, "[INST]")) return has(t, "<<SYS>>") ? ChatFamily::kLlama2 : ChatFamily::kMistral;
  fail("chat template not recognized (no <|im_start|>, <|start_header_id|> or [INST] marker; "
       "known names: chatml, llama3, llama2, mistral): '{}'",
       t.substr(0, 120));
}

std::string render_chat(ChatFamily f, const std::vector<ChatMessage>& msgs, bool prompt) {
  switch (f) {
    case ChatFamily::kChatML: return render_chatml(msgs, prompt);
    case ChatFamily::kLlama3: return render_llama3(msgs, prompt);
    case ChatFamily::kLlama2: return render_inst(msgs, true);
    case ChatFamily::kMistral: return render_inst(msgs, false);
  }
  fail("unknown chat family");
}

}  // namespace brisk
