#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "core/log.h"
#include "formats/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/normalize.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wpm.h"

namespace tmill {

using namespace tok;

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

Result<std::shared_ptr<Tokenizer>> Tokenizer::from_data(VocabData data) {
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->data_ = std::move(data);
  TM_TRY(t->init());
  return t;
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& f) {
  TM_ASSIGN_OR_RETURN(VocabData v, vocab_from_gguf(f));
  return from_data(std::move(v));
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::from_hf_dir(const std::string& dir) {
  TM_ASSIGN_OR_RETURN(VocabData v, vocab_from_hf_dir(dir));
  return from_data(std::move(v));
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return from_hf_dir(path);
  auto f = GgufFile::open(path);
  if (!f.ok()) return Error{"cannot load tokenizer from '" + path + "': " + f.error()};
  return from_gguf(*f);
}

Status Tokenizer::init() {
  TM_ASSIGN_OR_RETURN(index_, finalize_vocab(data_));
  if (data_.kind == ModelKind::Bpe) {
    TM_ASSIGN_OR_RETURN(pre_, PreTokenizer::create(data_.pre_regex));
    TM_ASSIGN_OR_RETURN(bpe_, BpeModel::build(data_, index_));
  }
  if (data_.kind == ModelKind::Wpm)
    for (const auto& t : data_.tokens) wpm_max_len_ = std::max(wpm_max_len_, t.text.size());
  match_all_.build(data_, index_, true);
  match_user_.build(data_, index_, false);

  const bool unescape = data_.kind != ModelKind::Bpe || data_.escape_whitespace;
  pieces_.resize(data_.tokens.size());
  for (size_t i = 0; i < data_.tokens.size(); ++i) {
    const auto& t = data_.tokens[i];
    std::string& p = pieces_[i];
    if (t.attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      p = t.text;
    } else if (t.attr & kAttrNormal) {
      p = unescape ? replace_all(t.text, kSpm, " ") : data_.byte_encode ? byte_level_decode(t.text) : t.text;
    } else if (t.attr & kAttrByte) {
      if (int b = parse_byte_token(t.text); b >= 0) {
        p = char(b);
      } else if (data_.byte_encode) {
        p = byte_level_decode(t.text);
      } else {
        p = t.text;
      }
    }
  }
  return ok_status();
}

void Tokenizer::encode_fragment(std::string_view text, bool at_input_start, bool after_special,
                                std::vector<int32_t>& out) const {
  bool prefix = false;
  switch (data_.space_prefix) {
    case SpacePrefix::None: break;
    case SpacePrefix::AfterSpecial: prefix = after_special; break;
    case SpacePrefix::FirstOnly: prefix = at_input_start; break;
    case SpacePrefix::Always: prefix = true; break;
  }
  if (data_.kind == ModelKind::Wpm) {
    wpm_tokenize(data_, index_, wpm_max_len_, text, out);
    return;
  }
  std::string buf;
  if (data_.nfc) {
    buf = nfc_normalize(text);
    text = buf;
  }
  if (data_.kind == ModelKind::Spm) {
    std::string s;
    s.reserve(text.size() + 8);
    if (prefix) s += ' ';
    s.append(text);
    spm_tokenize(data_, index_, data_.escape_whitespace ? replace_all(s, " ", kSpm) : s, out);
    return;
  }
  if (data_.escape_whitespace) {
    buf = replace_all(text, " ", kSpm);
    text = buf;
  }
  if (prefix && !(data_.prefix_if_missing && text.substr(0, kSpm.size()) == kSpm)) {
    std::string s(data_.escape_whitespace ? kSpm : " ");
    s.append(text);
    buf = std::move(s);
    text = buf;
  }
  std::string clean;
  if (!sanitize_utf8(text, clean)) text = clean;
  if (pre_.empty()) {
    bpe_->encode_word(text, out);
    return;
  }
  thread_local std::vector<Piece> pieces;
  pieces.clear();
  pre_.split(text, pieces);
  for (const Piece& p : pieces) bpe_->encode_word(text.substr(p.offset, p.length), out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && data_.add_bos && data_.bos >= 0) out.push_back(data_.bos);
  std::vector<Fragment> frags;
  (parse_special ? match_all_ : match_user_).partition(text, frags);
  bool after_special = true;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_fragment(text.substr(f.offset, f.length), f.offset == 0, after_special, out);
      after_special = false;
    }
  }
  if (add_special && data_.add_eos && data_.eos >= 0) out.push_back(data_.eos);
  if (add_special && data_.add_sep && data_.sep >= 0) out.push_back(data_.sep);
  return out;
}

const std::string& Tokenizer::piece(int32_t id, bool skip_special) const {
  if (id < 0 || id >= n_vocab()) return empty_;
  if (skip_special && (data_.tokens[id].attr & (kAttrControl | kAttrUnknown))) return empty_;
  return pieces_[id];
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return empty_;
  if (data_.tokens[id].attr & (kAttrControl | kAttrUnknown | kAttrUnused)) return empty_;
  return pieces_[id];
}


bool Tokenizer::strips_leading_space() const {
  return data_.space_prefix != SpacePrefix::None || data_.kind == ModelKind::Wpm;  // WordPiece words start with "▁"
}

std::string Tokenizer::decode_impl(std::span<const int32_t> ids, bool skip_special, bool strip) const {
  std::string out;
  bool first = strip && strips_leading_space();
  for (int32_t id : ids) {
    const std::string& p = piece(id, skip_special);
    if (p.empty()) continue;
    if (first && p[0] == ' ') out.append(p, 1);
    else out += p;
    first = false;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return decode_impl(ids, skip_special, true);
}

std::string Tokenizer::decode_continuation(std::span<const int32_t> ids, bool skip_special) const {
  return decode_impl(ids, skip_special, false);
}

std::string Tokenizer::token_to_piece(int32_t id) const { return piece(id, false); }

std::vector<std::string> Tokenizer::token_bytes_all() const {
  std::vector<std::string> out(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) out[i] = token_bytes(int32_t(i));
  return out;
}

std::string Tokenizer::token_text(int32_t id) const {
  return id >= 0 && id < n_vocab() ? data_.tokens[id].text : std::string();
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  int32_t id = index_.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(index_.eog.begin(), index_.eog.end(), id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < n_vocab() && (data_.tokens[id].attr & (kAttrControl | kAttrUnknown));
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && (data_.tokens[id].attr & kAttrControl);
}

}  // namespace tmill
