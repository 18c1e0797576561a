// Perplexity and reference-vs-model comparison over a text, llama.cpp `llama-perplexity` style:
//
//   tokens = tokenize(text, add BOS as the vocabulary asks)
//   chunk k = tokens[k*n_ctx, (k+1)*n_ctx), k < floor(len / n_ctx) (the tail is dropped); its first
//             token is replaced by BOS when the vocabulary adds BOS, so every chunk starts fresh
//   each chunk is evaluated from position 0 with an empty cache; the logits at positions
//   p in [n_ctx/2, n_ctx - 1) are scored against the token at p + 1 (the first half only gives
//   context), i.e. n_ctx - 1 - n_ctx/2 tokens per chunk
//   PPL = exp(mean NLL over all scored tokens)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "eval/divergence.h"
#include "eval/kld_base.h"
#include "eval/logit_stream.h"

namespace tmill {
class Tokenizer;
}

namespace tmill::eval {

// A text file tokenized with the model's own tokenizer (BOS first when the vocabulary adds one,
// special-token text not parsed, as llama-perplexity). bos: the id chunks start with, or -1.
struct EvalText {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int32_t> tokens;
  int32_t bos = -1;
};
Result<EvalText> tokenize_text_file(const Model& model, const std::string& path);

// Chunks as described above. bos < 0: first tokens are kept. max_chunks 0: all.
std::vector<std::vector<int32_t>> make_chunks(const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                                              int64_t max_chunks = 0);
// First scored position of a chunk of n_ctx tokens (n_ctx / 2).
inline int64_t first_scored(int64_t n_ctx) { return n_ctx / 2; }

// Called after each chunk with (chunks done, total, running statistics).
using ChunkProgress = std::function<void(int64_t done, int64_t total, double running_ppl)>;

struct PerplexityResult {
  PplStats ppl;
  int64_t chunks = 0;
  int64_t n_ctx = 0;
  double seconds = 0;
  std::vector<double> nll;  // per scored token, chunk by chunk
};
// The stream's max_ctx must be at least the chunk length. base_out: also write every scored row as
// llama-perplexity --kl-divergence-base does (the writer was created with the chunks' original tokens).
Result<PerplexityResult> perplexity(LogitStream& stream, const std::vector<std::vector<int32_t>>& chunks,
                                    const ChunkProgress& progress = {}, KldBaseWriter* base_out = nullptr);

struct CompareResult {
  int64_t tokens = 0;
  int64_t chunks = 0;
  int64_t n_ctx = 0;
  SampleSummary kld;          // KL(reference || model) per scored token
  int64_t top1_same = 0;      // tokens where both argmax agree
  double top1_agreement = 0;  // top1_same / tokens
  PplStats ppl_reference, ppl_model;
  // ln(PPL_model / PPL_reference) = mean(nll_model - nll_reference), with the standard error of the
  // paired differences; and PPL_model - PPL_reference with its delta-method standard error.
  double ln_ppl_ratio = 0, ln_ppl_ratio_stderr = 0;
  double delta_ppl = 0, delta_ppl_stderr = 0;
  double seconds = 0;
};
// Both streams see the same chunks; their vocabularies must have the same size.
Result<CompareResult> compare(LogitStream& reference, LogitStream& model, const std::vector<std::vector<int32_t>>& chunks,
                              const ChunkProgress& progress = {});

// The model against llama.cpp's logits: the chunks and tokens of a KL-divergence base file
// (kld_base.h), each chunk's first token replaced by `bos` (>= 0) as llama-perplexity does when the
// vocabulary adds BOS, the model's logits at the scored positions compared with the file's rows
// (compare_token_base). max_chunks 0: all of the file's chunks. The stream's vocabulary must be the file's.
Result<CompareResult> compare_reference_logits(LogitStream& model, const KldBaseFile& base, int32_t bos,
                                               int64_t max_chunks = 0, const ChunkProgress& progress = {});

}  // namespace tmill::eval
