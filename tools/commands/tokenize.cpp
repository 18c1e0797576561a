// tokenmill tokenize --model FILE (--text T | --file F) [--add-special] [--parse-special]
//   prints the token ids as a JSON array on one line.
// tokenmill detokenize --model FILE --ids 1,2,3 [--skip-special]
//   prints the decoded text (no trailing newline).
// FILE is a vocab-only GGUF, a full model GGUF or a Hugging Face tokenizer folder.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli_common.h"
#include "core/log.h"
#include "core/mmap.h"
#include "core/strings.h"
#include "tokenizer/tokenizer.h"

namespace {

struct TokenizeCli {
  std::string model, text, file;
  bool add_special = false, parse_special = false;
};

struct DetokenizeCli {
  std::string model, ids;
  bool skip_special = false;
};

TM_COMMAND("tokenize", "print the token ids of a text as a JSON array", [](CLI::App& app) -> tmill::cli::CommandRun {
  auto o = std::make_shared<TokenizeCli>();
  app.add_option("--model,-m", o->model, "GGUF file or Hugging Face tokenizer folder")->required();
  auto* text = app.add_option("--text,-t", o->text, "text to tokenize");
  auto* file = app.add_option("--file,-f", o->file, "read the text from this file (bytes as they are)");
  text->excludes(file);
  app.add_flag("--add-special", o->add_special, "add BOS/EOS as the vocabulary asks");
  app.add_flag("--parse-special", o->parse_special, "turn special-token text (e.g. <|im_start|>) into tokens");
  return [o, text, file] {
    using namespace tmill;
    if (text->count() == 0 && file->count() == 0) {  // --text "" is a valid (empty) input
      log_error("tokenize needs --text or --file");
      return 2;
    }
    std::string input = o->text;
    if (!o->file.empty()) {
      auto r = read_file(o->file);
      if (!r.ok()) {
        log_error("{}", r.error());
        return 1;
      }
      input = std::move(*r);
    }
    auto tok = Tokenizer::load(o->model);
    if (!tok.ok()) {
      log_error("{}", tok.error());
      return 1;
    }
    auto ids = (*tok)->encode(input, o->add_special, o->parse_special);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
});

TM_COMMAND("detokenize", "print the text of comma-separated token ids", [](CLI::App& app) -> tmill::cli::CommandRun {
  auto o = std::make_shared<DetokenizeCli>();
  app.add_option("--model,-m", o->model, "GGUF file or Hugging Face tokenizer folder")->required();
  app.add_option("--ids", o->ids, "token ids, e.g. 1,2,3 (a JSON array also works)")->required();
  app.add_flag("--skip-special", o->skip_special, "leave out control tokens (BOS, EOS, ...)");
  return [o] {
    using namespace tmill;
    auto tok = Tokenizer::load(o->model);
    if (!tok.ok()) {
      log_error("{}", tok.error());
      return 1;
    }
    auto ids = tmill::cli::parse_token_ids(o->ids, (*tok)->n_vocab());
    if (!ids.ok()) {
      log_error("{}", ids.error());
      return 1;
    }
    std::string text = (*tok)->decode(*ids, o->skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  };
});

}  // namespace
