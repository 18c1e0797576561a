// llama.cpp's KL-divergence base file: what `llama-perplexity --kl-divergence-base FILE` writes (the
// reference model's log-probabilities, 16 bits each) and `--kl-divergence` reads back. tokenmill reads
// it (`eval compare --reference-logits FILE`: llama.cpp's logits as the reference) and writes it
// (`eval perplexity --kl-divergence-base FILE`: tokenmill's logits as llama.cpp's reference).
//
// Layout, little-endian, no padding (read from llama.cpp's tools/perplexity; the format has no version):
//   "_logits_"                      8 bytes
//   n_ctx, n_vocab, n_chunk         int32 each
//   tokens                          n_chunk * n_ctx int32: the text's tokens as tokenized (a chunk's
//                                   first token is replaced by BOS at evaluation when the vocabulary
//                                   adds BOS; the file keeps the original)
//   per chunk, per scored position p in [n_ctx/2, n_ctx - 1)  (n_ctx - 1 - n_ctx/2 rows):
//     scale, min_log_prob           float32 each (4 uint16 slots)
//     q[n_vocab], padded to even    uint16: log P(i) = scale * q[i] + min_log_prob, where the logits
//                                   are clamped to [max - 16, max] and quantized to 65535 steps
//                                   (q = 0 at or below the clamp)
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/mmap.h"
#include "core/result.h"
#include "eval/divergence.h"

namespace tmill::eval {

// uint16 slots per row: the two floats, then the vocabulary rounded up to even.
inline int64_t kld_row_slots(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }
// Rows per chunk: the scored positions.
inline int64_t kld_rows_per_chunk(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

// One row of base log-probabilities.
struct KldBaseRow {
  float scale = 0;
  float min_log_prob = 0;
  const uint16_t* q = nullptr;  // n_vocab values (not necessarily 4-byte aligned: read by value)
  float log_prob(int64_t i) const { return scale * static_cast<float>(q[i]) + min_log_prob; }
};

class KldBaseFile {
 public:
  // Maps and validates the file: magic, positive sizes, a length that matches them exactly, tokens
  // inside the vocabulary. Errors name the file and what is wrong.
  static Result<KldBaseFile> open(const std::string& path);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_chunk() const { return n_chunk_; }
  // The stored tokens of chunk c (n_ctx of them).
  std::vector<int32_t> chunk_tokens(int64_t c) const;
  // Row r (0 = position n_ctx/2) of chunk c.
  KldBaseRow row(int64_t c, int64_t r) const;

 private:
  MappedFile file_;
  int64_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0;
  size_t tokens_at_ = 0, rows_at_ = 0;
};

// Encodes a logits row as llama-perplexity does; out has kld_row_slots(n) slots. Returns the
// negative log-likelihood of `target` (what perplexity adds up).
double encode_kld_row(const float* logits, int64_t n, int32_t target, uint16_t* out);

// Writes a base file chunk by chunk: header and tokens first, then rows in order.
class KldBaseWriter {
 public:
  ~KldBaseWriter();
  KldBaseWriter(KldBaseWriter&& o) noexcept;
  KldBaseWriter(const KldBaseWriter&) = delete;
  KldBaseWriter& operator=(const KldBaseWriter&) = delete;
  KldBaseWriter& operator=(KldBaseWriter&&) = delete;

  // tokens: n_chunk * n_ctx original tokens (before the BOS replacement).
  static Result<KldBaseWriter> create(const std::string& path, int64_t n_ctx, int64_t n_vocab,
                                      std::span<const int32_t> tokens);
  Status add_row(const float* logits, int32_t target);
  // Flushes and closes; errors when the row count does not match the header.
  Status close();

 private:
  KldBaseWriter() = default;
  std::FILE* f_ = nullptr;
  std::string path_;
  int64_t n_vocab_ = 0, rows_expected_ = 0, rows_ = 0;
  std::vector<uint16_t> buf_;
};

// KL(base || model) of one position as llama-perplexity --kl-divergence computes it: the sum over
// tokens whose base log-probability is above -16, P from the 16-bit row, Q = softmax(model); top-1
// compares the base row's first maximum with the model's.
TokenComparison compare_token_base(const KldBaseRow& base, const float* model, int64_t n, int32_t target);

}  // namespace tmill::eval
