// Splitting input text around special / added tokens before tokenization, as llama.cpp's
// tokenizer_st_partition does: tokens are tried longest text first (then lowest id); each one
// takes its leftmost non-overlapping occurrences in the text not yet claimed; LSTRIP / RSTRIP
// tokens also swallow adjacent whitespace. A byte trie finds all candidate occurrences in one pass.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tmill::tok {

struct Fragment {
  int32_t token;  // -1: raw text [offset, offset + length)
  uint32_t offset, length;
};

class SpecialMatcher {
 public:
  // include_control: also match control/unknown tokens (parse_special = true); user-defined tokens
  // are always matched.
  void build(const VocabData& v, const VocabIndex& idx, bool include_control);
  void partition(std::string_view text, std::vector<Fragment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;
    int32_t term = -1;  // priority index into ids_, -1 if no token ends here
  };
  const VocabData* v_ = nullptr;
  std::vector<int32_t> ids_;  // token ids in priority order
  std::vector<Node> nodes_;   // nodes_[0] is the root
  int32_t root_next_[256];
};

}  // namespace tmill::tok
