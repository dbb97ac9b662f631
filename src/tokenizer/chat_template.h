// Chat templates: turns a conversation into the prompt text a chat model was trained
// on. brisk does not run Jinja; it recognizes the template family from markers in the
// model's tokenizer.chat_template (or a family name) and renders that family itself.
// BOS is not written: the tokenizer adds it (add_special) when the model wants it.
//
// Formats (S system, U user, A assistant; "+" joins, \n newline):
//   chatml:  <|im_start|>ROLE\nCONTENT<|im_end|>\n ... + <|im_start|>assistant\n
//   llama3:  <|start_header_id|>ROLE<|end_header_id|>\n\nTRIMMED<|eot_id|> ...
//            + <|start_header_id|>assistant<|end_header_id|>\n\n
//   llama2:  [INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] U [/INST]
//   mistral: [INST] S\n\nU [/INST] A</s>[INST] U [/INST]
// (llama2/mistral end with "[/INST]" after a user turn, which is the assistant prompt.)
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace brisk {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (chatml/llama3 accept any role)
  std::string content;
};

enum class ChatFamily { kChatML, kLlama3, kLlama2, kMistral };

std::string_view chat_family_name(ChatFamily f);

// `tmpl` is a Jinja chat template or a family name ("chatml", "llama3", "llama2",
// "mistral"). An empty template means the model has none: ChatML. Throws brisk::Error
// for a template with none of the known markers.
ChatFamily detect_chat_family(std::string_view tmpl);

// Renders the messages; with add_assistant_prompt, ends with what opens the
// assistant's reply. Throws brisk::Error for a role the family cannot express.
std::string render_chat(ChatFamily f, const std::vector<ChatMessage>& messages,
                        bool add_assistant_prompt = true);
inline std::string apply_chat_template(std::string_view tmpl,
                                       const std::vector<ChatMessage>& messages,
                                       bool add_assistant_prompt = true) {
  return render_chat(detect_chat_family(tmpl), messages, add_assistant_prompt);
}

}  // namespace brisk
