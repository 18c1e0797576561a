#include "tokenizer/unicode.h"

#include <array>

namespace tmill::tok {

size_t valid_utf8_len(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned c = p[i];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
  else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
  else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
  else return 0;
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i + k] & 0x3f);
  }
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  switch (len) {
    case 1: return p[0];
    case 2: return ((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu);
    case 3: return ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3fu) << 12) | ((p[2] & 0x3fu) << 6) | (p[3] & 0x3fu);
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

bool sanitize_utf8(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  bool clean = true;
  size_t i = 0, run = 0;  // [run, i) is a pending run of valid bytes
  while (i < in.size()) {
    if (static_cast<unsigned char>(in[i]) < 0x80) { ++i; continue; }
    size_t len = valid_utf8_len(in, i);
    if (len) { i += len; continue; }
    out.append(in.data() + run, i - run);
    out += "\xEF\xBF\xBD";
    clean = false;
    run = ++i;
  }
  out.append(in.data() + run, in.size() - run);
  return clean;
}

size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
    if (need <= back) return 0;  // complete (or not a multi-byte lead)
    // Check that the bytes present are a valid prefix (no overlong/surrogate start).
    unsigned char c1 = back >= 2 ? static_cast<unsigned char>(s[n - back + 1]) : 0x80;
    if (c == 0xc0 || c == 0xc1 || c > 0xf4) return 0;
    if (back >= 2) {
      if (c == 0xe0 && c1 < 0xa0) return 0;
      if (c == 0xed && c1 > 0x9f) return 0;
      if (c == 0xf0 && c1 < 0x90) return 0;
      if (c == 0xf4 && c1 > 0x8f) return 0;
    }
    return back;
  }
  return 0;
}

namespace {
struct ByteMap {
  std::array<std::string, 256> fwd;
  std::array<int16_t, 324> inv{};  // code points 0..323 cover the whole alphabet
  ByteMap() {
    inv.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + extra++);
      append_utf8(fwd[b], cp);
      inv[cp] = int16_t(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().fwd[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 324 ? byte_map().inv[cp] : -1; }

std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = valid_utf8_len(text, i);
    if (len == 0) { out += text[i++]; continue; }
    int b = unicode_to_byte(decode_utf8(text, i, len));
    if (b >= 0) out += char(b);
    else out.append(text.data() + i, len);
    i += len;
  }
  return out;
}

void byte_level_encode(std::string_view bytes, std::string& out) {
  const auto& m = byte_map();
  out.clear();
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += m.fwd[c];
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    size_t f = from.empty() ? std::string_view::npos : s.find(from, pos);
    if (f == std::string_view::npos) break;
    out.append(s.data() + pos, f - pos);
    out.append(to);
    pos = f + from.size();
  }
  out.append(s.data() + pos, s.size() - pos);
  return out;
}

int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool nfc_quick_stable(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len = valid_utf8_len(s, i);
    if (!len) return false;
    uint32_t cp = decode_utf8(s, i, len);
    i += len;
    // Ranges whose characters have NFC_Quick_Check=Yes and canonical combining class 0, so a
    // string made only of them is already NFC.
    bool ok = cp < 0x300 || (cp >= 0x400 && cp <= 0x482) || (cp >= 0x48a && cp <= 0x52f) ||
              (cp >= 0x2010 && cp <= 0x2027) || (cp >= 0x2030 && cp <= 0x205e) ||
              (cp >= 0x3000 && cp <= 0x3029) || (cp >= 0x3030 && cp <= 0x303f) ||
              (cp >= 0x3041 && cp <= 0x3096) || (cp >= 0x30a0 && cp <= 0x30ff) ||
              (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0xac00 && cp <= 0xd7a3) ||
              (cp >= 0xff01 && cp <= 0xff9d) || (cp >= 0x1f300 && cp <= 0x1faff);
    if (!ok) return false;
  }
  return true;
}

}  // namespace tmill::tok
