#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <queue>

#include "tokenizer/unicode.h"

namespace tmill::tok {
namespace {
constexpr uint64_t kEmpty = ~uint64_t(0);
constexpr size_t kCacheMax = 1 << 16;
constexpr size_t kCacheWordMax = 64;  // longer words are not cached

inline uint64_t pair_key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
inline uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}
}  // namespace

int32_t BpeModel::lookup_text(std::string_view s) const {
  int32_t id = idx_.find(s);
  if (id >= 0) return id;
  auto it = virt_map_.find(s);
  return it == virt_map_.end() ? -1 : it->second;
}

Result<std::unique_ptr<BpeModel>> BpeModel::build(const VocabData& v, const VocabIndex& idx) {
  std::unique_ptr<BpeModel> m(new BpeModel(v, idx));
  m->n_vocab_ = int32_t(v.tokens.size());
  m->n_merges_ = v.merges.size();
  auto intern = [&](const std::string& s) -> int32_t {
    int32_t id = m->lookup_text(s);
    if (id >= 0) return id;
    id = m->n_vocab_ + int32_t(m->virt_.size());
    m->virt_.push_back(s);
    m->virt_map_.emplace(s, id);
    return id;
  };
  size_t cap = 16;
  while (cap < v.merges.size() * 2 + 2) cap <<= 1;
  m->table_.assign(cap, Slot{kEmpty, 0, 0});
  m->mask_ = cap - 1;
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const auto& [a, b] = v.merges[r];
    int32_t la = intern(a), lb = intern(b), res = intern(a + b);
    uint64_t key = pair_key(la, lb);
    for (uint64_t h = mix(key) & m->mask_;; h = (h + 1) & m->mask_) {
      Slot& s = m->table_[h];
      if (s.key == kEmpty) {
        s = Slot{key, int32_t(r), res};
        break;
      }
      if (s.key == key) break;  // duplicate merge: the first (lowest) rank wins
    }
  }
  for (int b = 0; b < 256; ++b) {
    m->byte_sym_[b] = v.byte_encode ? m->lookup_text(byte_to_unicode(uint8_t(b))) : -1;
  }
  return m;
}

const BpeModel::Slot* BpeModel::find_merge(int32_t l, int32_t r) const {
  if (l < 0 || r < 0) return nullptr;
  uint64_t key = pair_key(l, r);
  for (uint64_t h = mix(key) & mask_;; h = (h + 1) & mask_) {
    const Slot& s = table_[h];
    if (s.key == key) return &s;
    if (s.key == kEmpty) return nullptr;
  }
}

void BpeModel::merge_symbols(std::vector<Sym>& syms) const {
  const int n = int(syms.size());
  if (n < 2) return;
  auto do_merge = [&](int l) {
    Sym& a = syms[l];
    Sym& b = syms[a.next];
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (a.next >= 0) syms[a.next].prev = l;
  };
  if (n <= 24) {
    // Short words: scan for the lowest-ranked adjacent pair.
    int32_t rank[24], res[24];
    auto update = [&](int i) {
      const Slot* s = syms[i].next >= 0 ? find_merge(syms[i].id, syms[syms[i].next].id) : nullptr;
      rank[i] = s ? s->rank : INT_MAX;
      res[i] = s ? s->id : -1;
    };
    for (int i = 0; i < n; ++i) update(i);
    while (true) {
      int best = -1;
      int32_t best_rank = INT_MAX;
      for (int i = 0; i != -1; i = syms[i].next) {
        if (rank[i] < best_rank) best_rank = rank[i], best = i;
      }
      if (best < 0) break;
      syms[best].id = res[best];
      do_merge(best);
      update(best);
      if (syms[best].prev >= 0) update(syms[best].prev);
    }
    return;
  }
  // Long words: a heap of candidate pairs with lazy invalidation (llama.cpp's work queue).
  struct Cand {
    int32_t rank, left, lid, rid, res;
    bool operator<(const Cand& o) const {  // priority_queue top = lowest rank, then leftmost
      return rank > o.rank || (rank == o.rank && left > o.left);
    }
  };
  std::priority_queue<Cand> q;
  auto add = [&](int l) {
    if (l < 0 || syms[l].next < 0) return;
    int r = syms[l].next;
    if (const Slot* s = find_merge(syms[l].id, syms[r].id)) q.push({s->rank, l, syms[l].id, syms[r].id, s->id});
  };
  for (int i = 0; i + 1 < n; ++i) add(i);
  while (!q.empty()) {
    Cand c = q.top();
    q.pop();
    Sym& a = syms[c.left];
    if (a.len == 0 || a.id != c.lid || a.next < 0 || syms[a.next].id != c.rid) continue;  // stale
    a.id = c.res;
    do_merge(c.left);
    add(a.prev);
    add(c.left);
  }
}

void BpeModel::emit(std::string_view word, const std::vector<Sym>& syms, std::vector<int32_t>& out) const {
  if (syms.empty()) return;
  for (int i = 0; i != -1; i = syms[i].next) {
    const Sym& s = syms[i];
    if (s.id >= 0 && s.id < n_vocab_) {
      out.push_back(s.id);
      continue;
    }
    std::string_view bytes = word.substr(s.start, s.len);
    if (v_.byte_encode) {
      // As llama.cpp: look up each byte of the alphabet text as a one-byte token; drop the rest.
      for (unsigned char b : bytes) {
        for (char c : byte_to_unicode(b)) {
          int32_t id = idx_.find(std::string_view(&c, 1));
          if (id >= 0) out.push_back(id);
        }
      }
    } else {
      for (unsigned char b : bytes) {
        int32_t id = v_.byte_fallback ? idx_.byte_tokens[b] : -1;
        if (id < 0) id = v_.unk;
        if (id >= 0) out.push_back(id);
      }
    }
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kCacheWordMax;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t out_start = out.size();
  if (v_.ignore_merges) {
    std::string enc;
    if (v_.byte_encode) byte_level_encode(word, enc);
    int32_t id = idx_.find(v_.byte_encode ? std::string_view(enc) : word);
    if (id >= 0) {
      out.push_back(id);
      goto done;
    }
  }
  {
    thread_local std::vector<Sym> syms;
    syms.clear();
    if (v_.byte_encode) {
      for (uint32_t i = 0; i < word.size(); ++i) {
        syms.push_back({byte_sym_[static_cast<unsigned char>(word[i])], i, 1, int32_t(i) - 1,
                        i + 1 == word.size() ? -1 : int32_t(i) + 1});
      }
    } else {
      for (uint32_t i = 0; i < word.size();) {
        uint32_t len = uint32_t(std::min<size_t>(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i));
        int32_t idx = int32_t(syms.size());
        syms.push_back({lookup_text(word.substr(i, len)), i, len, idx - 1, i + len == word.size() ? -1 : idx + 1});
        i += len;
      }
    }
    merge_symbols(syms);
    emit(word, syms, out);
  }
done:
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheMax) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + out_start, out.end()));
  }
}

}  // namespace tmill::tok
