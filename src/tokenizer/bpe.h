// Rank-based BPE over one pre-token (llama.cpp's llm_tokenizer_bpe_session / HF's BPE model):
// start from characters (for byte-level vocabularies: one GPT-2 alphabet character per input
// byte), repeatedly merge the adjacent pair with the lowest merge rank (leftmost on ties).
//
// Merges are looked up by (left id, right id) in an open-addressing table. Merge parts that are
// not vocabulary tokens get "virtual" ids >= n_vocab so malformed vocabularies still behave like
// the text-keyed reference; a final symbol that is not a token falls back to bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "tokenizer/vocab.h"

namespace tmill::tok {

class BpeModel {
 public:
  // `v` and `idx` must outlive the model.
  static Result<std::unique_ptr<BpeModel>> build(const VocabData& v, const VocabIndex& idx);

  // Appends the ids of one pre-token: raw bytes for byte-level vocabularies (mapped to the GPT-2
  // alphabet here), UTF-8 text otherwise.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  size_t n_merges() const { return n_merges_; }

 private:
  struct Slot {
    uint64_t key;
    int32_t rank;
    int32_t id;  // result of the merge (possibly virtual)
  };
  struct Sym {
    int32_t id;  // token id, virtual id (>= n_vocab) or -1
    uint32_t start, len;
    int32_t prev, next;
  };

  BpeModel(const VocabData& v, const VocabIndex& idx) : v_(v), idx_(idx) {}
  int32_t lookup_text(std::string_view s) const;  // token or virtual id, -1 if neither
  const Slot* find_merge(int32_t l, int32_t r) const;
  void merge_symbols(std::vector<Sym>& syms) const;
  void emit(std::string_view word, const std::vector<Sym>& syms, std::vector<int32_t>& out) const;

  const VocabData& v_;
  const VocabIndex& idx_;
  int32_t n_vocab_ = 0;
  size_t n_merges_ = 0;
  std::vector<Slot> table_;
  uint64_t mask_ = 0;
  std::vector<std::string> virt_;
  TokenMap virt_map_;
  int32_t byte_sym_[256];  // byte-level: id of the alphabet character for each byte

  // Per-word result cache (words repeat a lot in real text). Bounded; cleared when full.
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StrHash, std::equal_to<>> cache_;
};

}  // namespace tmill::tok
