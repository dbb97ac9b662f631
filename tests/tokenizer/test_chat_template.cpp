#include <gtest/gtest.h>

#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace brisk {
namespace {

const std::vector<ChatMessage> kChat = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello."},
    {"user", "Name a color."},
};

TEST(ChatTemplate, DetectsFamilyByMarkers) {
  // Excerpts of real templates.
  EXPECT_EQ(detect_chat_family("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
            ChatFamily::kChatML);
  EXPECT_EQ(detect_chat_family("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"),
            ChatFamily::kLlama3);
  EXPECT_EQ(detect_chat_family("{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + content + ' [/INST]' }}"),
            ChatFamily::kLlama2);
  EXPECT_EQ(detect_chat_family("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}"),
            ChatFamily::kMistral);
  EXPECT_EQ(detect_chat_family(""), ChatFamily::kChatML);  // the model has none
  EXPECT_EQ(detect_chat_family("llama3"), ChatFamily::kLlama3);
  EXPECT_THROW(detect_chat_family("{{ messages | to_json }}"), Error);
  EXPECT_EQ(chat_family_name(ChatFamily::kMistral), "mistral");
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(apply_chat_template("chatml", kChat),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nName a color.<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template("", {{"user", "x"}}, false), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(apply_chat_template("llama3", {{"system", " You are terse.\n"}, {"user", "Hi"}}),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(apply_chat_template("llama2", kChat),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
            "<s>[INST] Name a color. [/INST]");
}

TEST(ChatTemplate, Mistral) {
  EXPECT_EQ(apply_chat_template("mistral", kChat),
            "[INST] You are terse.\n\nHi [/INST] Hello.</s>[INST] Name a color. [/INST]");
  EXPECT_THROW(apply_chat_template("mistral", {{"tool", "x"}}), Error);
}

}  // namespace
}  // namespace brisk
