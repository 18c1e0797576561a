// UTF-8 helpers and the GPT-2 byte <-> printable-character mapping used by byte-level BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tmill::tok {

// Length of the UTF-8 sequence introduced by lead byte c (1 for continuation/invalid bytes, as
// llama.cpp's unicode_len_utf8 does: such bytes become one-byte symbols).
inline size_t utf8_len(unsigned char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid or truncated
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t valid_utf8_len(std::string_view s, size_t i);

// Decodes the valid sequence at s[i] (caller checked it with valid_utf8_len).
uint32_t decode_utf8(std::string_view s, size_t i, size_t len);
void append_utf8(std::string& out, uint32_t cp);

// Replaces every byte that does not start a valid UTF-8 sequence with U+FFFD (one per byte, as
// llama.cpp's unicode_cpts_from_utf8 does). Returns true if the input was already valid.
bool sanitize_utf8(std::string_view in, std::string& out);

// Number of bytes at the end of s that form an incomplete (but so far valid) UTF-8 sequence,
// i.e. bytes that may still become a character when more bytes arrive. 0..3.
size_t incomplete_utf8_tail(std::string_view s);

// GPT-2 byte-level alphabet: every byte maps to one printable code point (UTF-8 encoded).
const std::string& byte_to_unicode(uint8_t b);
// Inverse mapping for one code point; -1 if the code point is not in the alphabet.
int unicode_to_byte(uint32_t cp);
// Byte-level text (GPT-2 alphabet) -> raw bytes. Characters outside the alphabet are copied as-is.
std::string byte_level_decode(std::string_view text);
// Raw bytes -> GPT-2 alphabet.
void byte_level_encode(std::string_view bytes, std::string& out);

// "<0xNN>" (SentencePiece byte token, two hex digits) -> the byte; -1 for any other text.
int parse_byte_token(std::string_view text);

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
inline constexpr std::string_view kSpm = "\xE2\x96\x81";
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

// True if every code point is unchanged by Unicode NFC normalization for certain (quick check
// on ranges without composition or decomposition: ASCII, Latin-1, CJK ideographs, Hangul
// syllables ...). When false, the text may still be NFC.
bool nfc_quick_stable(std::string_view s);

}  // namespace tmill::tok
