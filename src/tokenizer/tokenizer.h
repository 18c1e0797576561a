// Text <-> token ids, matching llama.cpp (GGUF vocabularies) and Hugging Face tokenizers
// (tokenizer.json folders).
//
//   auto tok = Tokenizer::load("model.gguf");          // or an HF folder with tokenizer.json
//   std::vector<int32_t> ids = (*tok)->encode("Hello", /*add_special=*/true, /*parse_special=*/true);
//   std::string text = (*tok)->decode(ids);
//
// A Tokenizer is immutable after loading and safe to use from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special.h"
#include "tokenizer/vocab.h"

namespace tmill {

class GgufFile;

namespace tok {
class BpeModel;
}

class Tokenizer {
 public:
  // From the tokenizer.ggml.* metadata of a GGUF file (vocab-only or a full model).
  static Result<std::shared_ptr<Tokenizer>> from_gguf(const GgufFile& f);
  // From a Hugging Face folder: tokenizer.json (+ tokenizer_config.json when present).
  static Result<std::shared_ptr<Tokenizer>> from_hf_dir(const std::string& dir);
  // A GGUF file, or a directory (HF folder).
  static Result<std::shared_ptr<Tokenizer>> load(const std::string& path);
  // From an already filled data model (tests, converters).
  static Result<std::shared_ptr<Tokenizer>> from_data(tok::VocabData data);

  ~Tokenizer();

  // add_special: add BOS/EOS as the vocabulary asks (add_bos()/add_eos()).
  // parse_special: special-token text such as "<|im_start|>" becomes that token; when false it is
  // tokenized as plain text (user-defined tokens are matched either way, as in llama.cpp).
  // Invalid UTF-8 input never fails: byte-level vocabularies see U+FFFD for each bad byte (as
  // llama.cpp), SentencePiece vocabularies fall back to byte tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Concatenated token pieces. Control/unknown tokens are rendered as their text unless
  // skip_special. Leading-space rule (SentencePiece vocabularies, add_space_prefix): one leading
  // space is removed from the first piece that produces output, i.e. when the text being decoded
  // starts the document. HF does the same; llama.cpp's llama_detokenize differs only in keeping
  // the space after a skipped BOS. To decode a continuation of earlier text use
  // decode_continuation() (no stripping).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  std::string decode_continuation(std::span<const int32_t> ids, bool skip_special = false) const;

  // The raw bytes a token stands for (special tokens as their text; may be partial UTF-8).
  std::string token_to_piece(int32_t id) const;
  // token_bytes() of every token, index = token id (the grammar module's Vocabulary).
  std::vector<std::string> token_bytes_all() const;
  // Piece for decoding: empty for control/unknown tokens when skip_special.
  const std::string& piece(int32_t id, bool skip_special) const;
  std::string token_text(int32_t id) const;  // vocabulary string ("" if out of range)
  // The bytes a token adds to generated text, as structured output sees them (grammar::Vocabulary):
  // byte-level BPE mapped back to raw bytes, SentencePiece "▁" to a space, <0xXX> to that byte,
  // user-defined tokens as their text. Empty for control, unknown and unused tokens (and ids out of
  // range), which a grammar never allows.
  const std::string& token_bytes(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;

  int32_t n_vocab() const { return int32_t(data_.tokens.size()); }
  int32_t bos_id() const { return data_.bos; }
  int32_t eos_id() const { return data_.eos; }
  int32_t eot_id() const { return data_.eot; }
  int32_t eom_id() const { return data_.eom; }
  int32_t pad_id() const { return data_.pad; }
  int32_t unk_id() const { return data_.unk; }
  int32_t sep_id() const { return data_.sep; }
  // Fill-in-the-middle tokens (GGUF's tokenizer.ggml.fim_*_token_id, else found by their text): -1 when absent.
  int32_t fim_pre_id() const { return data_.fim_pre; }
  int32_t fim_suf_id() const { return data_.fim_suf; }
  int32_t fim_mid_id() const { return data_.fim_mid; }
  int32_t fim_rep_id() const { return data_.fim_rep; }
  int32_t fim_sep_id() const { return data_.fim_sep; }
  bool add_bos() const { return data_.add_bos; }
  bool add_eos() const { return data_.add_eos; }
  // True when decoding strips the SentencePiece leading space at the start of a text.
  bool strips_leading_space() const;
  std::string bos_text() const { return token_text(data_.bos); }
  std::string eos_text() const { return token_text(data_.eos); }
  bool is_eog(int32_t id) const;
  bool is_special(int32_t id) const;  // control or unknown type
  bool is_control(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return index_.eog; }
  std::optional<std::string> chat_template() const { return data_.chat_template; }

  const tok::VocabData& data() const { return data_; }

 private:
  Tokenizer();
  Status init();
  void encode_fragment(std::string_view text, bool at_input_start, bool after_special,
                       std::vector<int32_t>& out) const;
  std::string decode_impl(std::span<const int32_t> ids, bool skip_special, bool strip) const;

  tok::VocabData data_;
  tok::VocabIndex index_;
  tok::PreTokenizer pre_;
  std::unique_ptr<tok::BpeModel> bpe_;
  tok::SpecialMatcher match_all_, match_user_;
  std::vector<std::string> pieces_;  // decoded bytes per token (specials as text)
  std::string empty_;
  size_t wpm_max_len_ = 0;  // WordPiece: longest token text in bytes
};

}  // namespace tmill
