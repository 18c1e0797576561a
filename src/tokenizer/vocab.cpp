#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "core/log.h"
#include "formats/gguf.h"
#include "tokenizer/pretokenizer.h"

namespace tmill::tok {

uint32_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::Normal: return kAttrNormal;
    case TokenType::Unknown: return kAttrUnknown;
    case TokenType::Control: return kAttrControl;
    case TokenType::UserDefined: return kAttrUserDefined;
    case TokenType::Unused: return kAttrUnused;
    case TokenType::Byte: return kAttrByte;
    default: return kAttrUndefined;
  }
}

TokenType type_from_attr(uint32_t attr) {
  if (attr & kAttrUnknown) return TokenType::Unknown;
  if (attr & kAttrControl) return TokenType::Control;
  if (attr & kAttrUserDefined) return TokenType::UserDefined;
  if (attr & kAttrUnused) return TokenType::Unused;
  if (attr & kAttrByte) return TokenType::Byte;
  if (attr & kAttrNormal) return TokenType::Normal;
  return TokenType::Undefined;
}

Result<VocabData> vocab_from_gguf(const GgufFile& f) {
  VocabData v;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return Error{"GGUF has no tokenizer.ggml.model (no vocabulary in this file)"};
  v.model = *model;
  v.pre = f.get_string("tokenizer.ggml.pre").value_or("");
  v.name = f.get_string("general.name").value_or("");

  if (v.model == "llama") {
    v.kind = ModelKind::Spm;
    v.bos = 1, v.eos = 2, v.unk = 0;  // llama.cpp defaults for SPM
    v.space_prefix = SpacePrefix::AfterSpecial;
    v.escape_whitespace = true;
    v.add_bos = true;
    v.add_eos = false;
  } else if (v.model == "gpt2" || v.model == "gemma4") {
    v.kind = ModelKind::Bpe;
    if (v.model == "gemma4") v.pre = "gemma4";
    v.bos = 11, v.eos = 11;  // llama.cpp defaults for BPE (overridden by the ids in the file)
    auto fam = pre_family(v.pre);
    if (!fam) return Error{"unsupported tokenizer.ggml.pre '" + v.pre + "'"};
    if (v.pre.empty()) log_warn("GGUF has no tokenizer.ggml.pre; using the default BPE pre-tokenizer");
    v.pre_regex = fam->regex;
    v.ignore_merges = fam->ignore_merges;
    v.add_bos = fam->add_bos;
    v.byte_encode = fam->byte_encode;
    v.escape_whitespace = fam->escape_whitespace;
    if (fam->no_bos) v.bos = -1;
    const GgufValue* m = f.find("tokenizer.ggml.merges");
    const auto* merges = m ? m->as_string_array() : nullptr;
    if (!merges) return Error{"BPE vocabulary without tokenizer.ggml.merges (string array)"};
    v.merges.reserve(merges->size());
    for (const auto& s : *merges) {
      size_t sp = s.find(' ', 1);  // the first part may itself be a space
      if (sp == std::string::npos) return Error{"malformed BPE merge '" + s + "'"};
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  } else if (v.model == "bert") {
    v.kind = ModelKind::Wpm;  // llama.cpp's defaults for WPM: [CLS] text [SEP]
    v.bos = 101, v.eos = -1, v.unk = 100, v.sep = 102, v.pad = 0;
    v.add_bos = true;
    v.add_sep = true;
  } else {
    return Error{"unsupported tokenizer.ggml.model '" + v.model + "' (supported: llama, gpt2, bert)"};
  }

  if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix"); b.has_value() && v.kind == ModelKind::Spm) {
    v.space_prefix = *b ? SpacePrefix::AfterSpecial : SpacePrefix::None;
  }

  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  const auto* texts = toks ? toks->as_string_array() : nullptr;
  if (!texts || texts->empty()) return Error{"GGUF has no tokenizer.ggml.tokens string array"};
  const size_t n = texts->size();
  if (n > size_t(INT32_MAX)) return Error{"vocabulary too large"};
  std::optional<std::vector<float>> scores;
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    scores = s->as_f32_array();
    if (!scores || scores->size() < n) return Error{"tokenizer.ggml.scores is not a number array of n_vocab entries"};
  }
  std::optional<std::vector<int64_t>> types;
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    types = t->as_int_array();
    if (!types || types->size() < n) return Error{"tokenizer.ggml.token_type is not an int array of n_vocab entries"};
  }
  v.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto& t = v.tokens[i];
    t.text = (*texts)[i];
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    t.score = scores ? (*scores)[i] : 0.0f;
    t.attr = types ? attr_from_type(int32_t((*types)[i])) : kAttrNormal;
  }

  struct IdKey { const char* key; int32_t* dst; };
  const IdKey ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},       {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},       {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk},   {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.padding_token_id", &v.pad},   {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf}, {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad}, {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
  };
  // BERT vocabularies name [CLS] as cls_token_id; llama.cpp uses it as the BOS
  if (v.kind == ModelKind::Wpm && !f.find("tokenizer.ggml.bos_token_id"))
    if (auto cls = f.get_int("tokenizer.ggml.cls_token_id"); cls && *cls >= 0 && *cls < int64_t(n)) v.bos = int32_t(*cls);
  for (const auto& k : ids) {
    if (*k.dst >= int64_t(n)) *k.dst = -1;  // default out of range
    auto val = f.get_int(k.key);
    if (!val) continue;
    if (*val < 0 || *val >= int64_t(n)) {
      log_warn("{} = {} is out of the vocabulary; ignored", k.key, *val);
      continue;
    }
    *k.dst = int32_t(*val);
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_sep_token")) v.add_sep = *b;
  if (v.add_sep && v.sep < 0) v.add_sep = false;
  if (v.add_bos && v.bos < 0) return Error{"add_bos_token is true but there is no BOS token"};
  if (v.add_eos && v.eos < 0) return Error{"add_eos_token is true but there is no EOS token"};
  v.chat_template = f.get_string("tokenizer.chat_template");
  v.rerank_template = f.get_string("tokenizer.chat_template.rerank");
  return v;
}

namespace {
bool is_one_of(const std::string& s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}
}  // namespace

Result<VocabIndex> finalize_vocab(VocabData& v) {
  VocabIndex idx;
  const int32_t n = int32_t(v.tokens.size());
  if (n == 0) return Error{"empty vocabulary"};
  idx.token_to_id.reserve(size_t(n) * 2);
  for (int32_t i = 0; i < n; ++i) {
    auto [it, inserted] = idx.token_to_id.emplace(v.tokens[i].text, i);
    if (!inserted) {
      return Error{"duplicate token in vocabulary: '" + v.tokens[i].text + "' has ids " +
                   std::to_string(it->second) + " and " + std::to_string(i)};
    }
  }
  for (int32_t* id : {&v.bos, &v.eos, &v.eot, &v.eom, &v.unk, &v.pad, &v.sep, &v.fim_pre, &v.fim_suf,
                      &v.fim_mid, &v.fim_pad, &v.fim_rep, &v.fim_sep}) {
    if (*id >= n || *id < -1) *id = -1;
  }

  // Auto-detect special tokens by their text, as llama.cpp does. llama.cpp takes whichever
  // candidate its hash map yields first; we take the first name of the list that exists, so
  // "<|eot_id|>" wins over "<|end_of_text|>" deterministically.
  auto mark_control = [&](int32_t id) { v.tokens[id].attr |= kAttrControl; };
  auto detect = [&](int32_t& slot, std::initializer_list<std::string_view> names) {
    if (slot != -1) return;
    for (std::string_view name : names) {
      auto it = idx.token_to_id.find(name);
      if (it != idx.token_to_id.end()) {
        slot = it->second;
        mark_control(slot);
        return;
      }
    }
  };
  detect(v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                 "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                 "<end_of_utterance>"});
  detect(v.eom, {"<|eom_id|>"});
  detect(v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                     "<|code_prefix|>", "<|prefix|>"});
  detect(v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                     "<|code_suffix|>", "<|suffix|>"});
  detect(v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                     "<|code_middle|>", "<|middle|>"});
  detect(v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(v.fim_sep, {"<|file_sep|>"});

  // Control tokens whose text says "unused" are unused.
  for (auto& t : v.tokens) {
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) t.attr |= kAttrUnused;
  }

  // End-of-generation set.
  std::vector<int32_t> eog;
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep}) if (id >= 0) eog.push_back(id);
  for (int32_t i = 0; i < n; ++i) {
    if (is_one_of(v.tokens[i].text,
                  {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                   "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                   "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                   "<｜end▁of▁sentence｜>", "[e~["})) {
      eog.push_back(i);
      mark_control(i);
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) if (id >= 0) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  auto has_text = [&](const char* s) {
    for (int32_t id : eog) if (v.tokens[id].text == s) return id;
    return -1;
  };
  // gpt-oss / solar-open: "<|end|>" ends a message, not the generation.
  if (int32_t end = has_text("<|end|>"); end >= 0 &&
      ((has_text("<|return|>") >= 0 && has_text("<|call|>") >= 0) ||
       (has_text("<|calls|>") >= 0 && has_text("<|flush|>") >= 0))) {
    eog.erase(std::find(eog.begin(), eog.end(), end));
    v.tokens[end].attr = kAttrUserDefined;
  }
  if (int32_t s = has_text("</s>"); s >= 0 && has_text("<|tool_response>") >= 0) {
    eog.erase(std::find(eog.begin(), eog.end(), s));
    v.tokens[s].attr = kAttrNormal;
  }
  idx.eog = std::move(eog);

  // Per-model attribute fixes (llama.cpp keys them on general.name).
  std::string lname = v.name;
  for (auto& c : lname) c = char(std::tolower(static_cast<unsigned char>(c)));
  auto is_special_attr = [](uint32_t a) { return (a & (kAttrControl | kAttrUserDefined | kAttrUnknown)) != 0; };
  if (lname.find("phi-3") != std::string::npos || lname.find("phi3") != std::string::npos) {
    for (auto& t : v.tokens) if (is_special_attr(t.attr)) t.attr |= kAttrRstrip;
    auto set = [&](const char* text, bool on) {
      auto it = idx.token_to_id.find(text);
      if (it == idx.token_to_id.end()) return;
      auto& a = v.tokens[it->second].attr;
      a = on ? (a | kAttrRstrip) : (a & ~kAttrRstrip);
    };
    set("</s>", true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, false);
  }

  for (int32_t i = 0; i < n; ++i)
    if (is_special_attr(v.tokens[i].attr)) idx.special_tokens.push_back(i);
  std::stable_sort(idx.special_tokens.begin(), idx.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].text.size() > v.tokens[b].text.size();
  });

  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
    auto it = idx.token_to_id.find(buf);
    idx.byte_tokens[b] = it == idx.token_to_id.end() ? -1 : it->second;
  }
  return idx;
}

}  // namespace tmill::tok
