#include "tokenizer/spm.h"

#include <queue>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace tmill::tok {
namespace {

struct Symbol {
  int prev, next;
  uint32_t start, n;  // bytes of the text; n == 0 once merged into the left neighbour
};

struct Bigram {
  int left, right;
  float score;
  uint32_t size;
};
struct BigramLess {  // priority_queue top = highest score, then leftmost
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class Session {
 public:
  Session(const VocabData& v, const VocabIndex& idx, std::string_view text) : v_(v), idx_(idx), text_(text) {}

  void run(std::vector<int32_t>& out) {
    for (uint32_t off = 0; off < text_.size();) {
      uint32_t len = uint32_t(std::min<size_t>(utf8_len(static_cast<unsigned char>(text_[off])), text_.size() - off));
      int index = int(syms_.size());
      syms_.push_back({index - 1, off + len == text_.size() ? -1 : index + 1, off, len});
      off += len;
    }
    for (int i = 1; i < int(syms_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      Bigram b = queue_.top();
      queue_.pop();
      Symbol& l = syms_[b.left];
      Symbol& r = syms_[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) syms_[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    if (syms_.empty()) return;
    for (int i = 0; i != -1; i = syms_[i].next) resegment(syms_[i], out);
  }

 private:
  std::string_view str(const Symbol& s) const { return text_.substr(s.start, s.n); }

  void try_add(int left, int right) {
    if (left < 0 || right < 0) return;
    std::string_view t = text_.substr(syms_[left].start, syms_[left].n + syms_[right].n);
    int32_t id = idx_.find(t);
    if (id < 0) return;
    queue_.push({left, right, v_.tokens[id].score, uint32_t(t.size())});
    rev_merge_[t] = {left, right};
  }

  // (A merged symbol is always a token, so the rev_merge path is only reached in degenerate
  // vocabularies; the depth bound keeps it finite there.)
  void resegment(const Symbol& s, std::vector<int32_t>& out, int depth = 0) {
    std::string_view t = str(s);
    int32_t id = idx_.find(t);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge_.find(t);
    if (it == rev_merge_.end() || depth > 64) {
      for (unsigned char c : t) push_byte(c, out);
      return;
    }
    auto [l, r] = it->second;
    resegment(syms_[l], out, depth + 1);
    resegment(syms_[r], out, depth + 1);
  }

  void push_byte(unsigned char c, std::vector<int32_t>& out) {
    int32_t id = idx_.byte_tokens[c];
    if (id < 0) id = idx_.find(std::string_view(reinterpret_cast<const char*>(&c), 1));
    if (id < 0) id = v_.unk;
    if (id >= 0) out.push_back(id);
  }

  const VocabData& v_;
  const VocabIndex& idx_;
  std::string_view text_;
  std::vector<Symbol> syms_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
  std::unordered_map<std::string_view, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_tokenize(const VocabData& v, const VocabIndex& idx, std::string_view text, std::vector<int32_t>& out) {
  Session(v, idx, text).run(out);
}

}  // namespace tmill::tok
