// Unicode tables for WordPiece (BERT) pre-processing, as llama.cpp builds them (scripts/gen_wpm_unicode.py
// writes wpm_unicode_data.cpp): category flags, simple lowercase, and the first code point of each
// code point's NFD form (llama.cpp's per-code-point "NFD", which drops combining accents).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmill::tok {

namespace wpm_data {
struct RangeFlags { uint32_t first; uint8_t flags; };  // up to the next entry's first - 1
struct CpMap { uint32_t from, to; };
struct RangeNfd { uint32_t first, last, nfd; };
extern const RangeFlags kFlags[];
extern const size_t kFlagsSize;
extern const CpMap kLower[];      // sorted by from
extern const size_t kLowerSize;
extern const RangeNfd kNfd[];     // sorted, disjoint
extern const size_t kNfdSize;
}  // namespace wpm_data

enum WpmFlag : uint8_t { kWpmControl = 1, kWpmPunct = 2, kWpmSymbol = 4 };

uint8_t wpm_flags(uint32_t cp);     // \p{C} except unassigned, \p{P}, \p{S}
bool wpm_whitespace(uint32_t cp);   // the White_Space property
uint32_t wpm_tolower(uint32_t cp);
uint32_t wpm_nfd_first(uint32_t cp);

}  // namespace tmill::tok
