// The explicit batch description the model receives each step. The model never sees requests or
// the scheduler: only token ids, where each sequence's tokens sit in the batch, their positions,
// and the block table that maps positions to KV-cache blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace tmill {

struct SeqSlice {
  int32_t token_begin = 0;  // first index of this sequence's tokens in ForwardBatch::tokens
  int32_t n_tokens = 0;     // tokens of this sequence computed this step (prompt chunk or 1)
  int32_t pos_begin = 0;    // position of the first of them (= tokens already in the KV cache)
  std::vector<int32_t> block_table;  // blocks covering positions [0, pos_begin + n_tokens)
  // Which logits to produce: none, the last token's (decode / end of prompt), or every token's
  // (perplexity evaluation, prompt logprobs).
  enum class Logits : uint8_t { None, Last, All } logits = Logits::Last;
};

struct ForwardBatch {
  std::vector<int32_t> tokens;  // (n_tokens) all sequences' tokens, flattened in seq order
  std::vector<SeqSlice> seqs;
  int64_t n_logit_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.logits == SeqSlice::Logits::All ? s.n_tokens : s.logits == SeqSlice::Logits::Last;
    return n;
  }
};

}  // namespace tmill
