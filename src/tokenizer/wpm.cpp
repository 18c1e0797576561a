#include "tokenizer/wpm.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/wpm_unicode.h"

namespace tmill::tok {

uint8_t wpm_flags(uint32_t cp) {
  using namespace wpm_data;
  const RangeFlags* end = kFlags + kFlagsSize;
  const RangeFlags* it = std::upper_bound(kFlags, end, cp, [](uint32_t c, const RangeFlags& r) { return c < r.first; });
  return it == kFlags ? 0 : (it - 1)->flags;
}

bool wpm_whitespace(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

uint32_t wpm_tolower(uint32_t cp) {
  using namespace wpm_data;
  const CpMap* end = kLower + kLowerSize;
  const CpMap* it = std::lower_bound(kLower, end, cp, [](const CpMap& m, uint32_t c) { return m.from < c; });
  return it != end && it->from == cp ? it->to : cp;
}

uint32_t wpm_nfd_first(uint32_t cp) {
  using namespace wpm_data;
  const RangeNfd* end = kNfd + kNfdSize;
  const RangeNfd* it = std::upper_bound(kNfd, end, cp, [](uint32_t c, const RangeNfd& r) { return c < r.first; });
  if (it == kNfd) return cp;
  --it;
  return cp <= it->last ? it->nfd : cp;
}

namespace {
bool is_chinese_char(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
         (c >= 0x2B920 && c <= 0x2CEAF) ||  // as llama.cpp (and HF's Rust code): 0x2B920, not 0x2B820
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
}  // namespace

std::vector<std::string> wpm_preprocess(std::string_view text) {
  std::vector<std::string> words(1);
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = valid_utf8_len(text, i);
    uint32_t cp = 0xFFFD;  // an invalid byte is U+FFFD, as llama.cpp's unicode_cpts_from_utf8
    if (len) cp = decode_utf8(text, i, len);
    i += len ? len : 1;
    cp = wpm_nfd_first(cp);
    if (wpm_whitespace(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const uint8_t f = wpm_flags(cp);
    if (cp == 0 || cp == 0xFFFD || (f & kWpmControl)) continue;
    std::string s;
    append_utf8(s, wpm_tolower(cp));
    if ((f & kWpmPunct) || (cp < 0x7F && (f & kWpmSymbol)) || is_chinese_char(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);  // a word of its own
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void wpm_tokenize(const VocabData& v, const VocabIndex& idx, size_t max_token_len, std::string_view text,
                  std::vector<int32_t>& out) {
  for (const std::string& word : wpm_preprocess(text)) {
    if (word.empty()) continue;
    const std::string w = std::string(kSpm) + word;  // the vocabulary's word-start marker
    const size_t n = w.size(), start = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool match = false;
      for (size_t j = std::min(n, i + max_token_len + 1); j > i; --j) {
        const int32_t id = idx.find(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          match = true;
          i = j - 1;
          break;
        }
      }
      if (!match) {  // the whole word becomes the unknown token
        out.resize(start);
        break;
      }
    }
    if (out.size() == start) out.push_back(v.unk);
  }
}

}  // namespace tmill::tok
