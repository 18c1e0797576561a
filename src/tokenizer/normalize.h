// Unicode normalization for HF normalizers (NFC). Uses ICU when the build found it; without ICU
// the text is returned unchanged (nfc_available() says which).
#pragma once

#include <string>
#include <string_view>

namespace tmill::tok {

bool nfc_available();
// NFC of valid UTF-8 text; invalid UTF-8 is returned unchanged.
std::string nfc_normalize(std::string_view text);

}  // namespace tmill::tok
