// SentencePiece-style tokenization as llama.cpp's llm_tokenizer_spm does it: start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the vocabulary token with
// the highest score (leftmost on ties), then re-split pieces that are not tokens into the pairs
// they were built from, and finally fall back to <0xNN> byte tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tmill::tok {

// `text` is already escaped (spaces are "▁", prefix applied).
void spm_tokenize(const VocabData& v, const VocabIndex& idx, std::string_view text, std::vector<int32_t>& out);

}  // namespace tmill::tok
