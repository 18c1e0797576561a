// The explicit batch description the model receives each step. The model never sees requests or
// the scheduler: only token ids, where each sequence's tokens sit in the batch, their positions,
// and the block table that maps positions to KV-cache blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace tmill {

class LoraAdapter;

// An adapter applied to some sequences of a batch: y += scale * B (A x) on every adapted matrix.
struct LoraBinding {
  const LoraAdapter* adapter = nullptr;  // kept alive by the caller for the step
  float scale = 1.0f;                    // the user's scale (alpha / rank is the adapter's own)
};

struct SeqSlice {
  int32_t token_begin = 0;  // first index of this sequence's tokens in ForwardBatch::tokens
  int32_t n_tokens = 0;     // tokens of this sequence computed this step (prompt chunk or 1)
  int32_t pos_begin = 0;    // position of the first of them (= tokens already in the KV cache)
  std::vector<int32_t> block_table;  // blocks covering positions [0, pos_begin + n_tokens)
  // Which logits to produce: none, the last token's (decode / end of prompt), or every token's
  // (perplexity evaluation, prompt logprobs).
  enum class Logits : uint8_t { None, Last, All } logits = Logits::Last;
  int32_t lora = -1;        // index into ForwardBatch::loras; -1: the base model
  // Recurrent models (Mamba-2 mixers): the sequence's state slot (KvStorage::seq_state), which holds
  // its state after position pos_begin - 1; ignored when pos_begin is 0 (a zero state) and by models
  // without recurrent layers.
  int32_t state_slot = 0;
};

struct ForwardBatch {
  std::vector<int32_t> tokens;  // (n_tokens) all sequences' tokens, flattened in seq order
  std::vector<SeqSlice> seqs;
  std::vector<LoraBinding> loras;  // adapters some seqs use (empty: none, the forward does no LoRA work)
  // Embeddings (model/embedder.h): the rows that would get logits get the final normed hidden state
  // (n_embd floats each) instead.
  bool hidden = false;
  int64_t n_logit_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.logits == SeqSlice::Logits::All ? s.n_tokens : s.logits == SeqSlice::Logits::Last;
    return n;
  }
  // The token rows that get logits, in seq order: the rows a forward pass returns.
  std::vector<int64_t> logit_rows() const {
    std::vector<int64_t> rows;
    for (const auto& s : seqs) {
      if (s.logits == SeqSlice::Logits::All)
        for (int32_t i = 0; i < s.n_tokens; ++i) rows.push_back(s.token_begin + i);
      else if (s.logits == SeqSlice::Logits::Last)
        rows.push_back(s.token_begin + s.n_tokens - 1);
    }
    return rows;
  }
};

}  // namespace tmill
