// GBNF (llama.cpp's grammar format) to a syntax tree: rules of alternatives of sequences of
// literals, character classes (code points), `.`, rule references, groups and repetitions.
// Code points stay code points here; the compiler (compiler.h) lowers them to UTF-8 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace tmill::grammar::gbnf {

// A 128-bit hash (two independent 64-bit halves), built by mixing in 64-bit words.
struct Hash128 {
  uint64_t a = 0x9E3779B97F4A7C15ull, b = 0xD1B54A32D192ED03ull;
  bool operator==(const Hash128&) const = default;
  void mix(uint64_t v) {
    a = (a ^ v) * 0x100000001B3ull;
    a ^= a >> 29;
    b = (b + v + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    b ^= b >> 31;
  }
};

// A code point range, inclusive.
using CpRange = std::pair<uint32_t, uint32_t>;

struct Expr {
  enum class Kind : uint8_t {
    Seq,      // kids in order (empty: matches "")
    Alt,      // one of kids
    Literal,  // text: UTF-8 bytes to match exactly
    Class,    // ranges (negated already applied: the code points matched)
    Ref,      // rule: index into Syntax::rules
    Repeat,   // kids[0] repeated min..max times (max < 0: unbounded)
  };
  Kind kind = Kind::Seq;
  std::vector<Expr> kids;
  std::string text;
  std::vector<CpRange> ranges;
  int32_t rule = -1;
  int32_t min = 0, max = 0;
  Hash128 hash;  // of the structure above (kind, text, ranges, rule, bounds, kids): set by parse()
};

struct Rule {
  std::string name;
  Expr body;
  bool defined = false;
  int line = 0, col = 0;  // where first referenced or defined (for errors)
};

struct Syntax {
  std::vector<Rule> rules;
};

// Largest {m,n} bound accepted (beyond it a grammar is refused rather than expanded).
inline constexpr int32_t kMaxRepeat = 1000000;

Result<Syntax> parse(std::string_view text);

// The code points of the complement of `ranges` within Unicode scalar values.
std::vector<CpRange> complement(std::vector<CpRange> ranges);
// Sorted, merged, surrogates removed.
std::vector<CpRange> normalize(std::vector<CpRange> ranges);

}  // namespace tmill::grammar::gbnf
