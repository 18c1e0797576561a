// Incremental detokenizer for streaming completions.
//
//   StreamingDetokenizer det(tok, prompt_ids, {.stop = {"\nUser:"}});
//   for each generated id: send(det.push(id)); if (det.stopped()) break;
//   send(det.finish());
//
// Guarantees:
//  * Only complete UTF-8 is emitted: bytes of a character split across tokens (byte-fallback
//    <0xNN> tokens, byte-level BPE pieces) are held until the character is complete. Bytes that
//    can never form a character become U+FFFD, so every emitted piece is valid UTF-8.
//  * Stop strings: text that a stop string could still swallow (the longest suffix that is a
//    prefix of some stop string) is held back. When a stop string appears, the text before it is
//    emitted, stopped() turns true and nothing more is emitted; the stop string itself is not.
//  * The concatenation of everything emitted equals the full decode of the generated ids
//    (Tokenizer::decode for a completion that starts the text, decode_continuation otherwise),
//    with invalid UTF-8 replaced by U+FFFD, up to the stop string.
//
// Leading-space rule (SentencePiece vocabularies, Tokenizer::strips_leading_space()): the first
// generated piece loses one leading space only when the completion starts the text, i.e. the
// prompt decodes to nothing (empty, or only control tokens such as BOS) — as llama2.c and HF's
// decoders do for "<s>▁Once" -> "Once". After a prompt with text the space is kept: "Once upon a"
// + "▁time" streams " time". Byte-level vocabularies never strip.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tmill {

class StreamingDetokenizer {
 public:
  struct Options {
    bool skip_special = true;            // control tokens (EOS, <|im_end|> ...) produce no text
    std::vector<std::string> stop;       // stop strings (empty strings are ignored)
    bool strip_leading_space = false;    // set by the prompt constructor (see above)
  };

  StreamingDetokenizer(std::shared_ptr<const Tokenizer> tok, Options opt);
  // Derives strip_leading_space from the prompt (see the leading-space rule).
  StreamingDetokenizer(std::shared_ptr<const Tokenizer> tok, std::span<const int32_t> prompt, Options opt);

  // True when a completion after `prompt` starts the text (the leading-space rule).
  static bool starts_text(const Tokenizer& tok, std::span<const int32_t> prompt);

  // Feeds one generated token; returns the text that is now final (possibly empty).
  std::string push(int32_t id);
  // End of generation: releases held text (incomplete UTF-8 becomes U+FFFD).
  std::string finish();

  bool stopped() const { return stop_index_ >= 0; }
  int stop_index() const { return stop_index_; }  // which stop string matched, -1 if none
  const std::string& text() const { return emitted_; }  // everything emitted so far

 private:
  std::string release(bool final);

  std::shared_ptr<const Tokenizer> tok_;
  Options opt_;
  bool first_piece_ = true;
  std::string bytes_;    // raw bytes of an incomplete UTF-8 character
  std::string held_;     // valid text held back for stop strings
  std::string emitted_;
  size_t max_stop_ = 0;
  int stop_index_ = -1;
};

}  // namespace tmill
