// fuzz-deps: grammar
// libFuzzer target: the input is a JSON Schema (first byte 'R' + text: a regex instead). Whatever
// it is, translating must not crash; when it translates, the GBNF must compile (a translator that
// emits GBNF its own engine rejects is a bug), and the matcher must survive a few probe texts.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tmill::grammar;
  if (size > (1u << 16)) return 0;
  std::string in(reinterpret_cast<const char*>(data), size);
  static const std::shared_ptr<const Vocabulary> vocab = [] {
    VocabularyData d;
    for (int b = 0; b < 256; ++b) d.token_bytes.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\": ", ", \"", "true", "null", "\"}", "[1, ", "]}"}) d.token_bytes.emplace_back(t);
    d.token_bytes.emplace_back();
    d.eos_tokens = {static_cast<int32_t>(d.token_bytes.size() - 1)};
    return Vocabulary::create(std::move(d));
  }();
  tmill::Result<std::string> gbnf = std::string();
  if (!in.empty() && in[0] == 'R') {
    gbnf = regex_to_gbnf(in.substr(1));
  } else {
    JsonOptions o;
    o.flexible_whitespace = size % 2 == 1;
    gbnf = json_schema_text_to_gbnf(in, o);
  }
  if (!gbnf.ok()) return 0;
  auto g = compile_gbnf(*gbnf, vocab);
  if (!g.ok()) {
    // Limits of the engine (sizes, counted repetitions) are fine; anything else is a translator bug.
    if (g.error().find("too") == std::string::npos && g.error().find("limit") == std::string::npos) std::abort();
    return 0;
  }
  std::vector<uint32_t> mask(Matcher::mask_words(vocab->size()));
  for (const char* probe : {"{\"a\": 1, \"b\": [true, null]}", "\"2024-02-29\"", "-12.5e3", "[]", "abc"}) {
    Matcher m(*g);
    for (const char* p = probe; *p; ++p) {
      m.fill_mask(mask);
      if (!m.accept_bytes(std::string_view(p, 1))) break;
    }
    (void)m.accepting();
  }
  return 0;
}
