#include "convert/hf_tokenizer.h"

#include "core/log.h"
#include "tokenizer/hf_json.h"

namespace tmill {

using namespace tok;

Status hf_tokenizer_to_gguf(const std::string& hf_dir, GgufWriter& w) {
  TM_ASSIGN_OR_RETURN(VocabData v, vocab_from_hf_dir(hf_dir));
  if (v.byte_encode && v.pre.empty()) {
    return Error{hf_dir + ": the pre-tokenizer matches no tokenizer.ggml.pre family, so GGUF cannot express it"};
  }
  if (v.nfc) log_info("{}: the NFC normalizer has no GGUF key; NFC input tokenizes the same", hf_dir);
  if (!v.byte_encode) {
    log_warn("{}: SentencePiece-style BPE written as a 'llama' (score) vocabulary with scores from token "
             "order; rare merge-order differences from the HF folder are possible", hf_dir);
  }
  const size_t n = v.tokens.size();
  std::vector<std::string> texts(n);
  std::vector<int32_t> types(n);
  std::vector<float> scores(n);
  for (size_t i = 0; i < n; ++i) {
    texts[i] = v.tokens[i].text;
    types[i] = static_cast<int32_t>(type_from_attr(v.tokens[i].attr));
    scores[i] = (v.tokens[i].attr & kAttrNormal) ? -float(i) : 0.0f;
  }
  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(texts)));
  if (v.model == "llama") {
    w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
    w.set_bool("tokenizer.ggml.add_space_prefix", v.space_prefix != SpacePrefix::None);
  }
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  if (v.model == "gpt2") {
    std::vector<std::string> merges;
    merges.reserve(v.merges.size());
    for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
    w.set("tokenizer.ggml.merges", GgufValue::string_array(std::move(merges)));
  }
  auto put_id = [&](const char* key, int32_t id) {
    if (id >= 0) w.set_u32(key, uint32_t(id));
    else w.remove(key);
  };
  put_id("tokenizer.ggml.bos_token_id", v.bos);
  put_id("tokenizer.ggml.eos_token_id", v.eos);
  put_id("tokenizer.ggml.unknown_token_id", v.unk);
  put_id("tokenizer.ggml.padding_token_id", v.pad);
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (v.chat_template) w.set_string("tokenizer.chat_template", *v.chat_template);
  return ok_status();
}

}  // namespace tmill
