// fuzz-deps: grammar
// libFuzzer target for the grammar engine (src/grammar/): the input is GBNF text, optionally followed by
// "\n%%\n" and drive bytes. When the grammar compiles, a matcher over a small fixed vocabulary (all single
// bytes, multi-byte UTF-8 pieces, tokens spanning JSON terminals, an EOS token) takes up to 24 steps, each
// drive byte choosing one of the allowed tokens. At every step the fast mask must equal the exact trie
// walk and the token-by-token check, every allowed token must be accepted, and forced_bytes() must be
// accepted. Compile errors must be messages; nothing may crash, hang or grow without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace {

using namespace tmill::grammar;

const std::shared_ptr<const Vocabulary>& vocab() {
  static const std::shared_ptr<const Vocabulary> v = [] {
    VocabularyData d;
    for (int b = 0; b < 256; ++b) d.token_bytes.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"ab", "abc", "aa", "aaaa", "\"", "\",", "\":", "\": \"", "{\"", "\"}", "}\n", "[1", ", ",
                          "12", "1.5", "-0", "true", "null", "\\n", "\\u00", "\xC3\xA9", "\xA9\"", "a\xC3",
                          "\xE4\xB8\xAD", "\xE4\xB8", "\xF0\x9F\x98\x80", "  ", "\n  ", "xyz", "()", "+1"}) {
      d.token_bytes.emplace_back(t);
    }
    d.token_bytes.emplace_back();  // EOS
    d.eos_tokens = {static_cast<int32_t>(d.token_bytes.size() - 1)};
    return Vocabulary::create(std::move(d));
  }();
  return v;
}

bool has(const std::vector<uint32_t>& m, int32_t t) { return (m[static_cast<size_t>(t) / 32] >> (t % 32)) & 1; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  if (in.size() > 8192) return 0;
  std::string drive;
  if (auto cut = in.find("\n%%\n"); cut != std::string::npos) {
    drive = in.substr(cut + 4);
    in.resize(cut + 1);
  }
  auto g = compile_gbnf(in, vocab());
  if (!g.ok()) {
    if (g.error().empty()) abort();
    return 0;
  }
  const Vocabulary& v = *vocab();
  Matcher m(g.value());
  std::vector<uint32_t> fast(Matcher::mask_words(v.size())), ref(fast.size());
  for (size_t step = 0; step < 24; ++step) {
    if (m.num_stacks() > 2000) break;  // very ambiguous grammars: the reference walk gets slow
    m.fill_mask(fast);
    m.fill_mask_reference(ref);
    if (fast != ref) abort();
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < v.size(); ++t) {
      Matcher c(m);
      bool ok = c.accept_token(t);
      if (ok != has(fast, t)) abort();
      if (ok) allowed.push_back(t);
    }
    std::string forced = m.forced_bytes(64);
    if (!forced.empty()) {
      Matcher c(m);
      if (!c.accept_bytes(forced)) abort();
    }
    if (m.terminated() && !m.accepting()) abort();
    if (allowed.empty() || step >= drive.size()) break;
    int32_t t = allowed[static_cast<uint8_t>(drive[step]) % allowed.size()];
    if (!m.accept_token(t)) abort();
  }
  return 0;
}
