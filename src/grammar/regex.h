// Regular expressions (ECMAScript / Python `re` syntax as JSON Schema's "pattern" uses them) to GBNF
// expressions. Internal to the grammar module; the public entry is regex_to_gbnf (json_schema.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/result.h"

namespace tmill::grammar::detail {

enum class RegexMode {
  Raw,         // the expression matches the text itself
  JsonString,  // the expression matches the inside of a JSON string whose decoded value matches
};

inline constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

struct RegexGbnf {
  std::string expr;      // one GBNF expression (no rules of its own)
  uint64_t min_len = 0;  // code points of the matched (decoded) text
  uint64_t max_len = 0;  // kUnbounded when unbounded
};

// search: JSON Schema semantics (the pattern may match anywhere unless anchored with ^ / $);
// otherwise the whole text must match (anchors at the ends are allowed and change nothing).
// Errors name the construct and its offset: backreferences, lookaround, \b, flags, \p{...}.
// any_rule: a rule matching any one character, used for the open sides of a search.
// len_min/len_max: the matched text's length in code points must lie in this range (minLength /
// maxLength beside a pattern); an error when that cannot be expressed exactly.
Result<RegexGbnf> regex_expr(std::string_view pattern, RegexMode mode, bool search, std::string_view any_rule = {},
                             uint64_t len_min = 0, uint64_t len_max = kUnbounded);

}  // namespace tmill::grammar::detail
