// Pre-tokenizer: splits text into words with a sequence of regular expressions (PCRE2, UTF + UCP,
// JIT-compiled). Each regex is applied inside the pieces left by the previous one; the text
// between matches is kept as pieces too (HF's Split "Isolated" behaviour, llama.cpp's
// unicode_regex_split). Look-ahead such as GPT-2's `\s+(?!\S)` cannot see past a piece.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace tmill::tok {

// What tokenizer.ggml.pre implies (llama.cpp's per-family pre-tokenizer and flags).
struct PreFamily {
  std::vector<std::string> regex;
  bool ignore_merges = false;
  bool add_bos = false;        // default for add_bos when tokenizer.ggml.add_bos_token is absent
  bool no_bos = false;         // the family has no BOS token (chatglm/glm4)
  bool byte_encode = true;     // false: raw UTF-8 BPE (gemma4-style)
  bool escape_whitespace = false;
};
// nullopt for an unknown name. "" and "default" give llama.cpp's default regexes.
std::optional<PreFamily> pre_family(std::string_view pre);
// Every name pre_family() accepts.
const std::vector<std::string>& known_pre_names();

struct Piece {
  uint32_t offset;
  uint32_t length;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  // Compiles the regexes (errors name the bad pattern and the PCRE2 message).
  static Result<PreTokenizer> create(const std::vector<std::string>& regexes);

  bool empty() const { return regs_.empty(); }
  // Splits `text`, which must be valid UTF-8, into pieces covering it in order (empty pieces are
  // dropped). Appends to `out`.
  void split(std::string_view text, std::vector<Piece>& out) const;

 private:
  struct Compiled;
  std::vector<std::shared_ptr<const Compiled>> regs_;
};

}  // namespace tmill::tok
