// fuzz-deps: tokenizer
// libFuzzer target: the input is a tokenizer.json. When it loads, a fixed multilingual string is
// encoded with every add_special/parse_special combination, decoded, and streamed; invariants:
// ids are in range, streamed output is valid UTF-8 and equals the sanitized full decode.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/strings.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tmill;
  if (size > (1u << 20)) return 0;
  const std::string json(reinterpret_cast<const char*>(data), size);
  auto v = tok::vocab_from_hf_json(json, R"({"bos_token": "<s>", "eos_token": "</s>"})");
  if (!v.ok()) return 0;
  auto t = Tokenizer::from_data(std::move(*v));
  if (!t.ok()) return 0;
  std::shared_ptr<const Tokenizer> tok = *t;
  static const std::string kText =
      "Hello world! It's 123 <s> caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\n\n  x\t</s>\xFF end";
  for (int flags = 0; flags < 4; ++flags) {
    auto ids = tok->encode(kText, flags & 1, flags & 2);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok->n_vocab()) std::abort();
    }
    const std::string full = tok->decode(ids, true);
    StreamingDetokenizer d(tok, std::span<const int32_t>{}, {.stop = {"zz"}});
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = d.push(id);
      if (!is_valid_utf8(piece)) std::abort();
      streamed += piece;
    }
    streamed += d.finish();
    std::string clean;
    tok::sanitize_utf8(full, clean);
    if (!d.stopped() && streamed != clean) std::abort();
  }
  return 0;
}
