#include <numeric>

#include "grammar/internal.h"
#include "grammar/mask_cache.h"

namespace tmill::grammar {

Vocabulary::Impl::Impl() = default;
Vocabulary::Impl::~Impl() = default;

Vocabulary::Vocabulary() = default;
Vocabulary::~Vocabulary() = default;

std::shared_ptr<const Vocabulary> Vocabulary::create(VocabularyData data) {
  std::shared_ptr<Vocabulary> v(new Vocabulary());
  v->impl_ = std::make_unique<Impl>();
  Impl& im = *v->impl_;
  im.data = std::move(data);
  auto n = static_cast<int32_t>(im.data.token_bytes.size());
  im.eos_mask.assign(Matcher::mask_words(n), 0);
  std::vector<char> is_eos(static_cast<size_t>(n), 0);
  for (int32_t e : im.data.eos_tokens) {
    if (e >= 0 && e < n) {
      is_eos[static_cast<size_t>(e)] = 1;
      im.eos_mask[static_cast<size_t>(e) / 32] |= 1u << (e % 32);
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int32_t t = 0; t < n; ++t) {
    if (!is_eos[static_cast<size_t>(t)]) ids.push_back(t);
  }
  im.trie = TokenTrie::build(im.data.token_bytes, ids);
  std::vector<int32_t> short_ids, long_ids;
  for (int32_t t : ids) {
    (im.data.token_bytes[static_cast<size_t>(t)].size() <= kShortTokenBytes ? short_ids : long_ids).push_back(t);
  }
  im.short_trie = TokenTrie::build(im.data.token_bytes, short_ids);
  im.long_trie = TokenTrie::build(im.data.token_bytes, long_ids);
  im.short_trie.compute_subtree_bytes();
  im.trie.compute_subtree_bytes();
  im.cache = std::make_unique<MaskCache>();
  return v;
}

int32_t Vocabulary::size() const { return static_cast<int32_t>(impl_->data.token_bytes.size()); }
const std::string& Vocabulary::token_bytes(int32_t t) const { return impl_->data.token_bytes.at(static_cast<size_t>(t)); }
const std::vector<int32_t>& Vocabulary::eos_tokens() const { return impl_->data.eos_tokens; }

}  // namespace tmill::grammar
