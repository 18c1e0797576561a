#include "tokenizer/normalize.h"

#include "tokenizer/unicode.h"

#ifdef TM_HAVE_ICU
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>
#endif

namespace tmill::tok {

#ifdef TM_HAVE_ICU
bool nfc_available() { return true; }

std::string nfc_normalize(std::string_view text) {
  if (nfc_quick_stable(text) || text.size() > size_t(INT32_MAX / 4)) return std::string(text);
  UErrorCode st = U_ZERO_ERROR;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&st);
  if (U_FAILURE(st)) return std::string(text);
  // UTF-8 -> UTF-16 -> NFC -> UTF-8.
  int32_t n16 = 0;
  st = U_ZERO_ERROR;
  u_strFromUTF8(nullptr, 0, &n16, text.data(), int32_t(text.size()), &st);
  if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st)) return std::string(text);
  std::vector<UChar> src(size_t(n16) + 1);
  st = U_ZERO_ERROR;
  u_strFromUTF8(src.data(), n16 + 1, nullptr, text.data(), int32_t(text.size()), &st);
  if (U_FAILURE(st)) return std::string(text);
  std::vector<UChar> dst(size_t(n16) * 3 + 16);
  st = U_ZERO_ERROR;
  int32_t nd = unorm2_normalize(nfc, src.data(), n16, dst.data(), int32_t(dst.size()), &st);
  if (U_FAILURE(st)) return std::string(text);
  std::string out(size_t(nd) * 3 + 4, '\0');
  int32_t n8 = 0;
  st = U_ZERO_ERROR;
  u_strToUTF8(out.data(), int32_t(out.size()), &n8, dst.data(), nd, &st);
  if (U_FAILURE(st)) return std::string(text);
  out.resize(size_t(n8));
  return out;
}
#else
bool nfc_available() { return false; }
std::string nfc_normalize(std::string_view text) { return std::string(text); }
#endif

}  // namespace tmill::tok
