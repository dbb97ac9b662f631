// `brisk tokenize`: prints the token ids of a text on one line, separated by spaces.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "format/model_source.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Print the token ids of a text"};
  std::string model = brisk::default_model_path(), prompt, file;
  bool add_special = false, parse_special = false, json = false;
  app.add_option("-m,--model", model, "a .gguf file or a Hugging Face folder");
  auto* p = app.add_option("-p,--prompt", prompt, "the text");
  auto* f = app.add_option("-f,--file", file, "read the text from a file (as is)");
  p->excludes(f);
  app.add_flag("--add-special", add_special, "add BOS/EOS where the vocabulary asks for them");
  app.add_flag("--parse-special", parse_special, "turn special-token texts into their ids");
  app.add_flag("--json", json, "print {\"ids\": [...], \"n_tokens\": N}");
  CLI11_PARSE(app, argc, argv);
  if (!*p && !*f) brisk::fail("give the text with -p TEXT or -f FILE");

  std::string text = prompt;
  if (*f) {
    std::ifstream in(file, std::ios::binary);
    if (!in) brisk::fail("cannot read '{}'", file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }

  const brisk::ModelSource src = brisk::load_model_source(model);
  const auto tok = brisk::Tokenizer::from_source(src);
  const auto ids = tok->encode(text, add_special, parse_special);
  if (json) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}, {"n_tokens", ids.size()}}.dump().c_str());
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

}  // namespace

BRISK_COMMAND("tokenize", "print the token ids of a text", cmd_tokenize);
