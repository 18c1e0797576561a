#include "tokenizer/hf_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <filesystem>

#include "core/log.h"
#include "core/mmap.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace tmill::tok {
namespace {

using json = nlohmann::json;

// HF ByteLevel(use_regex = true) pattern (GPT-2).
const char* const kHfGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Metaspace(split = true): "▁" starts a new piece.
const char* const kMetaspaceSplit = R"(\x{2581}[^\x{2581}]*|[^\x{2581}]+)";

// A token id: an integer in [0, 2^22) (floats and out-of-range numbers are errors, not UB).
Result<int64_t> json_id(const json& j) {
  if (!j.is_number_integer()) return Error{"token id is not an integer"};
  int64_t id = j.is_number_unsigned() ? (j.get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : int64_t(j.get<uint64_t>()))
                                      : j.get<int64_t>();
  if (id < 0 || id >= (int64_t(1) << 22)) return Error{"token id out of range (0 .. 4M)"};
  return id;
}

std::string json_str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// bos_token etc. are a string or an AddedToken object {"content": ...}.
std::string token_field(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return json_str(*it, "content");
  return {};
}

struct Pipeline {
  bool byte_level = false;
  bool metaspace = false;
  bool escape_ws = false;  // normalizer Replace(" ", "▁")
  bool prepend = false;    // normalizer Prepend("▁")
  SpacePrefix meta_prefix = SpacePrefix::None;
  bool byte_level_prefix = false;  // ByteLevel add_prefix_space
  bool nfc = false;
  std::vector<std::string> regex;
};

Status parse_normalizer(const json& n, Pipeline& p) {
  if (n.is_null()) return ok_status();
  const std::string type = json_str(n, "type");
  if (type == "Sequence") {
    for (const auto& c : n.at("normalizers")) TM_TRY(parse_normalizer(c, p));
  } else if (type == "NFC") {
    p.nfc = true;
    if (!nfc_available()) log_warn("tokenizer.json asks for NFC but this build has no ICU: text is not normalized");
  } else if (type == "Replace") {
    std::string pat = json_str(n.at("pattern"), "String");
    if (pat != " " || json_str(n, "content") != std::string(kSpm))
      return Error{"unsupported Replace normalizer (only ' ' -> '▁' is supported)"};
    p.escape_ws = true;
  } else if (type == "Prepend") {
    if (json_str(n, "prepend") != std::string(kSpm)) return Error{"unsupported Prepend normalizer"};
    p.prepend = true;
  } else {
    return Error{"unsupported normalizer '" + type + "'"};
  }
  return ok_status();
}

Status parse_pre(const json& n, Pipeline& p, bool top) {
  if (n.is_null()) return ok_status();
  const std::string type = json_str(n, "type");
  if (type == "Sequence") {
    bool first = true;
    for (const auto& c : n.at("pretokenizers")) {
      TM_TRY(parse_pre(c, p, top && first));
      first = false;
    }
  } else if (type == "Split") {
    const json& pat = n.at("pattern");
    // Gemma's: split at " " keeping it with the piece before, after a normalizer that turned every
    // " " into "▁" -- nothing is left to split at
    if (p.escape_ws && pat.contains("String") && pat.at("String") == " " && !n.value("invert", false) &&
        json_str(n, "behavior") == "MergedWithPrevious")
      return ok_status();
    std::string re;
    if (pat.contains("Regex")) {
      re = pat.at("Regex").get<std::string>();
    } else {  // a literal string: quote it for PCRE2
      re = "\\Q" + pat.at("String").get<std::string>() + "\\E";
    }
    if (json_str(n, "behavior") != "Isolated") return Error{"unsupported Split behavior '" + json_str(n, "behavior") + "'"};
    if (n.value("invert", false)) return Error{"unsupported Split with invert = true"};
    p.regex.push_back(re);
  } else if (type == "ByteLevel") {
    p.byte_level = true;
    if (n.value("add_prefix_space", false)) {
      if (!top) return Error{"unsupported ByteLevel add_prefix_space after another pre-tokenizer"};
      p.byte_level_prefix = true;
    }
    if (n.value("use_regex", true)) p.regex.push_back(kHfGpt2);
  } else if (type == "Digits") {
    p.regex.push_back(n.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "Metaspace") {
    if (json_str(n, "replacement") != std::string(kSpm)) return Error{"unsupported Metaspace replacement"};
    p.metaspace = true;
    std::string scheme = json_str(n, "prepend_scheme");
    if (scheme.empty()) scheme = n.value("add_prefix_space", true) ? "always" : "never";
    p.meta_prefix = scheme == "always" ? SpacePrefix::Always : scheme == "first" ? SpacePrefix::FirstOnly : SpacePrefix::None;
    if (n.value("split", true)) p.regex.push_back(kMetaspaceSplit);
  } else {
    return Error{"unsupported pre_tokenizer '" + type + "'"};
  }
  return ok_status();
}

Result<VocabData> build(const json& j, const json& cfg) {
  VocabData v;
  const json& model = j.at("model");
  if (json_str(model, "type") != "BPE" && !(model.contains("merges") && json_str(model, "type").empty()))
    return Error{"unsupported tokenizer model '" + json_str(model, "type") + "' (only BPE)"};
  if (!json_str(model, "continuing_subword_prefix").empty() || !json_str(model, "end_of_word_suffix").empty())
    return Error{"unsupported BPE continuing_subword_prefix / end_of_word_suffix"};
  v.kind = ModelKind::Bpe;

  Pipeline p;
  TM_TRY(parse_normalizer(j.value("normalizer", json()), p));
  TM_TRY(parse_pre(j.value("pre_tokenizer", json()), p, true));
  if (p.byte_level && (p.metaspace || p.escape_ws)) return Error{"unsupported mix of ByteLevel and Metaspace"};
  v.byte_encode = p.byte_level;
  v.nfc = p.nfc;
  v.pre_regex = p.regex;
  if (p.metaspace) {
    v.escape_whitespace = true;
    v.space_prefix = p.meta_prefix;
    v.prefix_if_missing = true;
  } else if (p.escape_ws || p.prepend) {
    v.escape_whitespace = p.escape_ws;
    v.space_prefix = p.prepend ? SpacePrefix::AfterSpecial : SpacePrefix::None;
  } else if (p.byte_level_prefix) {
    v.space_prefix = SpacePrefix::Always;
    v.prefix_if_missing = true;
  }
  v.ignore_merges = model.value("ignore_merges", false);
  v.byte_fallback = model.value("byte_fallback", false);

  // Vocabulary: model.vocab plus added_tokens, indexed by id.
  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) return Error{"model.vocab is not an object"};
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    TM_ASSIGN_OR_RETURN(int64_t id, json_id(it.value()));
    max_id = std::max(max_id, id);
  }
  const json added = j.value("added_tokens", json::array());
  if (!added.is_array()) return Error{"added_tokens is not an array"};
  for (const auto& a : added) {
    TM_ASSIGN_OR_RETURN(int64_t id, json_id(a.at("id")));
    max_id = std::max(max_id, id);
  }
  if (max_id < 0) return Error{"tokenizer.json has an empty vocabulary"};
  v.tokens.resize(size_t(max_id) + 1);
  std::vector<bool> seen(v.tokens.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int64_t id = *json_id(it.value());  // validated above
    v.tokens[id].text = it.key();
    seen[id] = true;
  }
  for (const auto& a : added) {
    const int64_t id = *json_id(a.at("id"));
    auto& t = v.tokens[id];
    t.text = a.at("content").get<std::string>();
    t.attr = a.value("special", false) ? kAttrControl : kAttrUserDefined;
    if (a.value("lstrip", false)) t.attr |= kAttrLstrip;
    if (a.value("rstrip", false)) t.attr |= kAttrRstrip;
    seen[id] = true;
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (!seen[i]) {  // a hole in the id space
      v.tokens[i].text = "[PAD" + std::to_string(i) + "]";
      v.tokens[i].attr = kAttrUnused;
    } else if (!v.byte_encode && v.tokens[i].attr == kAttrNormal && parse_byte_token(v.tokens[i].text) >= 0) {
      v.tokens[i].attr = kAttrByte;
    }
  }
  for (const auto& m : model.at("merges")) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return Error{"malformed merge '" + s + "'"};
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2) {
      v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Error{"malformed merge entry in tokenizer.json"};
    }
  }

  // Special tokens from tokenizer_config.json (and the model's unk_token).
  auto id_of = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    for (size_t i = 0; i < v.tokens.size(); ++i) if (v.tokens[i].text == text) return int32_t(i);
    return -1;
  };
  v.bos = id_of(token_field(cfg, "bos_token"));
  v.eos = id_of(token_field(cfg, "eos_token"));
  v.pad = id_of(token_field(cfg, "pad_token"));
  std::string unk = token_field(cfg, "unk_token");
  if (unk.empty()) unk = json_str(model, "unk_token");
  v.unk = id_of(unk);
  if (v.unk >= 0 && !(v.tokens[v.unk].attr & kAttrControl)) v.tokens[v.unk].attr = kAttrUnknown;

  if (v.byte_encode) {
    v.model = "gpt2";
    v.pre = detect_pre_family(v.pre_regex, v.ignore_merges);
  } else {
    v.model = "llama";  // SentencePiece-style vocabulary
    v.pre = "default";
  }
  // add_bos: tokenizer_config's add_bos_token, else a TemplateProcessing post-processor that puts
  // the BOS first, else llama.cpp's default for the detected family (Llama 3 adds BOS).
  const json post = j.value("post_processor", json());
  bool post_bos = false;
  if (post.is_object() && json_str(post, "type") == "TemplateProcessing" && v.bos >= 0) {
    const json single = post.value("single", json::array());
    if (!single.empty() && single[0].contains("SpecialToken"))
      post_bos = json_str(single[0]["SpecialToken"], "id") == v.tokens[v.bos].text;
  }
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    v.add_bos = cfg["add_bos_token"].get<bool>();
  } else if (post_bos) {
    v.add_bos = true;
  } else if (!v.byte_encode) {
    v.add_bos = v.bos >= 0;  // SentencePiece models add BOS by default
  } else if (auto fam = pre_family(v.pre)) {
    v.add_bos = fam->add_bos;
  }
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) v.add_eos = cfg["add_eos_token"].get<bool>();
  if (v.add_bos && v.bos < 0) v.add_bos = false;
  if (v.add_eos && v.eos < 0) v.add_eos = false;

  if (auto it = cfg.find("chat_template"); it != cfg.end()) {
    if (it->is_string()) {
      v.chat_template = it->get<std::string>();
    } else if (it->is_array()) {  // [{"name": ..., "template": ...}]: the "default" one, else the first
      for (const auto& t : *it)
        if (json_str(t, "name") == "default") v.chat_template = json_str(t, "template");
      if (!v.chat_template && !it->empty()) v.chat_template = json_str((*it)[0], "template");
    }
  }
  return v;
}

}  // namespace

Result<VocabData> vocab_from_hf_json(const std::string& tokenizer_json, const std::string& config_json) {
  try {
    json j = json::parse(tokenizer_json);
    json cfg = config_json.empty() ? json::object() : json::parse(config_json);
    if (!j.is_object()) return Error{"tokenizer.json is not a JSON object"};
    if (!cfg.is_object()) cfg = json::object();
    return build(j, cfg);
  } catch (const std::exception& e) {
    return Error{std::string("bad tokenizer.json: ") + e.what()};
  }
}

Result<VocabData> vocab_from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string tj = (fs::path(dir) / "tokenizer.json").string();
  auto text = read_file(tj);
  if (!text.ok()) return Error{"cannot read " + tj + ": " + text.error()};
  std::string cfg;
  std::error_code ec;
  const std::string cj = (fs::path(dir) / "tokenizer_config.json").string();
  if (fs::exists(cj, ec)) {
    auto c = read_file(cj);
    if (!c.ok()) return Error{"cannot read " + cj + ": " + c.error()};
    cfg = std::move(*c);
  }
  auto v = vocab_from_hf_json(*text, cfg);
  if (!v.ok()) return Error{dir + ": " + v.error()};
  // transformers >= 4.43 saves the template apart (gpt-oss ships chat_template.jinja only): read as
  // llama.cpp's SpecialVocab does, tokenizer_config.json's chat_template first, then
  // chat_template.jinja, then chat_template.json's "chat_template" (a string).
  if (!v->chat_template) {
    const std::string jinja = (fs::path(dir) / "chat_template.jinja").string();
    const std::string tjson = (fs::path(dir) / "chat_template.json").string();
    if (fs::exists(jinja, ec)) {
      auto t = read_file(jinja);
      if (!t.ok()) return Error{"cannot read " + jinja + ": " + t.error()};
      v->chat_template = std::move(*t);
    } else if (fs::exists(tjson, ec)) {
      auto t = read_file(tjson);
      if (!t.ok()) return Error{"cannot read " + tjson + ": " + t.error()};
      const auto j = nlohmann::json::parse(*t, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
        v->chat_template = j["chat_template"].get<std::string>();
      else
        log_warn("{}: no \"chat_template\" string in it; no chat template", tjson);
    }
  }
  return v;
}

std::string detect_pre_family(const std::vector<std::string>& regex, bool ignore_merges) {
  static const char* const kProbe =
      "Hello World! It's 12345 apples, you're RIGHT; I'LL go.\n\n  \t x  y\r\n   z\n"
      "\xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97\xE7\xAC\xA6 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xC3\x84\xC3\x96\xC3\x9C caf\xC3\xA9 1,000,000.00 $%^&*() <tag>x</tag> "
      "\xCE\xB1\xCE\xB2\xCE\xB3 \xD0\xBF\xD1\x80\xD0\xB8 CamelCaseWord snake_case 3.14159 ...!!! ???   \n\n\n  end   ";
  auto pieces = [](const std::vector<std::string>& re) -> std::optional<std::vector<Piece>> {
    auto p = PreTokenizer::create(re);
    if (!p.ok()) return std::nullopt;
    std::vector<Piece> out;
    p->split(kProbe, out);
    return out;
  };
  auto want = pieces(regex);
  if (!want) return "";
  auto same = [](const std::vector<Piece>& a, const std::vector<Piece>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Piece& x, const Piece& y) {
             return x.offset == y.offset && x.length == y.length;
           });
  };
  // Preferred names first (the ones llama.cpp's converter writes for the common models).
  static const char* const kOrder[] = {"llama-bpe", "dbrx", "qwen2", "gpt-2", "deepseek-llm", "deepseek-coder",
                                       "deepseek-v3", "starcoder", "falcon", "tekken", "gpt-4o", "qwen35",
                                       "seed-coder", "bailingmoe", "kimi-k2", "superbpe", "poro-chat", "viking",
                                       "chameleon", "minicpm5", "laguna", "ufakzeka", "default"};
  for (const char* name : kOrder) {
    auto fam = pre_family(name);
    if (!fam || fam->ignore_merges != ignore_merges) continue;
    auto got = pieces(fam->regex);
    if (got && same(*got, *want)) return name;
  }
  return "";
}

}  // namespace tmill::tok
