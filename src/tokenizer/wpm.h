// WordPiece (BERT vocabularies, tokenizer.ggml.model "bert"), equal to llama.cpp's WPM tokenizer:
// per code point NFD (first code point only) and lowercase, split on whitespace, punctuation, ASCII
// symbols and CJK ideographs (each one a word), drop control characters; then greedy longest match
// per word with the "▁" word prefix the GGUF vocabulary carries (HF's "##" pieces are stored bare),
// and the unknown token for a word that cannot be matched completely.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tmill::tok {

// The words WordPiece matches (normalized, lowercased UTF-8).
std::vector<std::string> wpm_preprocess(std::string_view text);

// Appends the ids of `text` (one fragment between special tokens) to out.
void wpm_tokenize(const VocabData& v, const VocabIndex& idx, size_t max_token_len, std::string_view text,
                  std::vector<int32_t>& out);

}  // namespace tmill::tok
