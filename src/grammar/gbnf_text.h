// Building blocks of the GBNF translators (json_schema*.cpp, regex*.cpp): code-point sets and their
// GBNF character classes, how a code point is written inside a JSON string, and a rule table that
// names and deduplicates rules. Internal to the grammar module.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tmill::grammar::detail {

inline constexpr uint32_t kMaxCp = 0x10FFFF;

// A set of Unicode code points as sorted, disjoint, non-adjacent closed ranges.
class CpSet {
 public:
  CpSet() = default;
  static CpSet range(uint32_t lo, uint32_t hi) {
    CpSet s;
    s.add(lo, hi);
    return s;
  }
  static CpSet any() { return range(0, kMaxCp); }
  void add(uint32_t lo, uint32_t hi);
  void add(const CpSet& o);
  CpSet negated() const;  // over [0, kMaxCp]
  CpSet minus(const CpSet& o) const;
  CpSet intersect(const CpSet& o) const;
  bool empty() const { return r_.empty(); }
  bool contains(uint32_t cp) const;
  bool single() const { return r_.size() == 1 && r_[0].first == r_[0].second; }
  uint32_t first() const { return r_.front().first; }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return r_; }
  bool operator==(const CpSet& o) const { return r_ == o.r_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> r_;
};

// UTF-8 encoding of one code point.
std::string utf8(uint32_t cp);
// Decodes the code point at s[i], advancing i; invalid bytes decode as themselves (Latin-1).
uint32_t next_cp(std::string_view s, size_t& i);

// "[...]" matching exactly the code points of s (s must not be empty).
std::string gbnf_class(const CpSet& s);
// A GBNF literal for bytes (same as the public gbnf_literal).
std::string literal(std::string_view bytes);

// Inside a JSON string, every code point has one canonical spelling (what Python's json.dumps with
// ensure_ascii=False writes): itself, except '"' and '\\' and the controls below U+0020, which are
// escaped (\" \\ \b \f \n \r \t, others \u00xx). Keeping to the canonical spelling makes every
// string have exactly one encoding, so lengths count code points and key sets can be complemented.
std::string json_escape_cp(uint32_t cp);
std::string json_escape(std::string_view utf8_text);  // whole string content, without the quotes
// GBNF expression matching one JSON-string character whose decoded code point is in s ("" if s is
// empty). Surrogates are never matched.
std::string json_char_expr(const CpSet& s);

// Rules by name, deduplicated by body. Names are [a-z0-9-] made from a hint.
class RuleSet {
 public:
  // A rule with this body (an existing one when the same body was added before).
  std::string add(std::string_view hint, const std::string& body);
  // A fresh name whose body is given later with define() (for recursion).
  std::string reserve(std::string_view hint);
  void define(const std::string& name, std::string body);
  void discard(const std::string& name);  // a reserved rule that will not be defined
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // The grammar text: "root ::= <root_body>" then every rule.
  std::string render(const std::string& root_body) const;
  size_t size() const { return rules_.size(); }

 private:
  std::string fresh(std::string_view hint);
  std::vector<std::pair<std::string, std::string>> rules_;
  std::unordered_map<std::string, size_t> index_;
  std::unordered_map<std::string, std::string> by_body_;
  std::unordered_map<std::string, int> counters_;
};

// True when a GBNF expression needs parentheses before a postfix operator or inside a sequence.
bool needs_group(std::string_view expr);
std::string group(const std::string& expr);  // "( expr )" when needed

}  // namespace tmill::grammar::detail
