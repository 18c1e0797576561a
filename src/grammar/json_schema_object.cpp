// Objects: declared properties in schema order (required ones present, optional ones skippable),
// other properties (additionalProperties) anywhere between them under keys that are none of the
// declared names, and minProperties/maxProperties by counting. The grammar is unambiguous: every
// object has one derivation, so the matcher never tracks duplicate parses.
//
// With props p_0..p_{n-1}, SEP the comma and X one additional key/value:
//   A(i,c) ::= SEP X A(i,c+1) | B(i,c)          (extras before p_i; only when extras are allowed)
//   B(i,c) ::= SEP KV_i A(i+1,c+1) | B(i+1,c)   (the second alternative when p_i is optional)
//   B(n,c) ::= empty                            (when c >= minProperties)
// where c counts members (saturating when there is no maxProperties). Rules hold only the non-empty
// derivations; "nullable" says whether the empty one exists too.
// With JsonOptions::any_order (checking text written by others) the p_i are the required properties
// only and X is also any optional declared property: those may come anywhere, even twice.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

#include "grammar/grammar.h"
#include "grammar/json_schema_impl.h"
#include "grammar/regex.h"

namespace tmill::grammar::detail {

namespace {

struct Part {
  std::optional<std::string> ne;  // rule for the non-empty derivations
  bool nullable = false;
  bool dead() const { return !ne && !nullable; }
  std::string ref() const {
    if (!ne) return "";
    return nullable ? *ne + "?" : *ne;
  }
};

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string alts_of(const std::vector<std::string>& alts) {
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// Does the pattern (JSON Schema semantics: a search) match text? Runs the pattern's own grammar.
Result<bool> pattern_matches(const std::string& pattern, const std::string& text) {
  static const std::shared_ptr<const Vocabulary> bytes = [] {
    VocabularyData d;
    for (int i = 0; i < 256; ++i) d.token_bytes.push_back(std::string(1, char(i)));
    d.token_bytes.emplace_back();
    d.eos_tokens = {256};
    return Vocabulary::create(std::move(d));
  }();
  TM_ASSIGN_OR_RETURN(RegexGbnf r, regex_expr(pattern, RegexMode::Raw, true));
  TM_ASSIGN_OR_RETURN(auto g, compile_gbnf("root ::= " + r.expr + "\n", bytes));
  Matcher m(g);
  return m.accept_bytes(text) && m.accepting();
}

// Additional properties may come between declared ones (true) or only after them (false: stricter).
constexpr bool kExtrasAnywhere = true;

bool universal_pattern(const std::string& p) {
  return p.empty() || p == ".*" || p == "^.*" || p == "^.*$" || p == ".*$" || p == "^" || p == "$";
}

}  // namespace

// A JSON string (with its quotes) that is none of names: a trie over their canonical spellings,
// leaving it at the first character no name continues with.
Result<std::string> Compiler::key_not_in(const std::vector<std::string>& names) {
  if (names.empty()) return any_string();
  struct TrieNode {
    std::map<uint32_t, size_t> kids;
    bool end = false;
  };
  std::vector<TrieNode> trie(1);
  for (auto& n : names) {
    size_t cur = 0;
    for (size_t i = 0; i < n.size();) {
      uint32_t cp = next_cp(n, i);
      auto it = trie[cur].kids.find(cp);
      if (it == trie[cur].kids.end()) {
        trie.push_back({});
        it = trie[cur].kids.emplace(cp, trie.size() - 1).first;
      }
      cur = it->second;
    }
    trie[cur].end = true;
  }
  std::string rest = rules_.add("key-rest", json_char() + "* \"\\\"\"");
  // Where every next character of the names is plain printable ASCII (the usual case), the other
  // characters split into the printable ASCII ones the names do not continue with, spelled here,
  // and the rest (non-ASCII, escapes), one shared rule: the grammar stays small for schemas with
  // hundreds of property names.
  const CpSet plain = CpSet::range(0x20, 0x7E).minus(CpSet::range('"', '"')).minus(CpSet::range('\\', '\\'));
  std::string other_rule;
  auto other = [&] {
    if (other_rule.empty()) {
      CpSet o = CpSet::any().minus(CpSet::range(0xD800, 0xDFFF)).minus(plain);
      other_rule = rules_.add("key-other", group(json_char_expr(o)) + " " + rest);
    }
    return other_rule;
  };
  std::function<std::string(size_t)> node = [&](size_t k) -> std::string {
    std::vector<std::string> alts;
    CpSet others = CpSet::any().minus(CpSet::range(0xD800, 0xDFFF));
    bool all_plain = true;
    for (auto& [cp, child] : trie[k].kids) {
      alts.push_back(literal(json_escape_cp(cp)) + " " + group(node(child)));
      others = others.minus(CpSet::range(cp, cp));
      all_plain = all_plain && plain.contains(cp);
    }
    if (trie[k].kids.empty()) {
      alts.push_back(json_char() + " " + rest);
    } else if (all_plain) {
      CpSet p = others.intersect(plain);
      if (!p.empty()) alts.push_back(json_char_expr(p) + " " + rest);
      alts.push_back(other());
    } else if (std::string o = json_char_expr(others); !o.empty()) {
      alts.push_back(group(o) + " " + rest);
    }
    if (!trie[k].end) alts.push_back("\"\\\"\"");
    return alts.size() == 1 ? alts[0] : "( " + alts_of(alts) + " )";
  };
  return rules_.add("key", "\"\\\"\" " + node(0));
}

Result<std::string> Compiler::gen_object(const Json& s, const std::string& ptr, int depth) {
  struct Prop {
    std::string name;
    std::string kv;  // key, colon, value
    bool required;
  };
  std::vector<Prop> props;
  std::vector<std::string> names;  // every declared name, also those that may not appear
  std::vector<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return Error{"'required' must be an array at '" + ptr + "'"};
    for (auto& r : *it) {
      if (!r.is_string()) return Error{"'required' must list strings at '" + ptr + "'"};
      if (std::find(required.begin(), required.end(), r.get<std::string>()) == required.end()) {
        required.push_back(r.get<std::string>());
      }
    }
  }
  auto is_req = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };
  Json addl = true;
  if (auto it = s.find("additionalProperties"); it != s.end()) addl = *it;
  // unevaluatedProperties without combinators acts like additionalProperties.
  if (auto it = s.find("unevaluatedProperties"); it != s.end() && !s.contains("additionalProperties")) addl = *it;
  std::string addl_ptr = pointer_append(ptr, "additionalProperties");
  // patternProperties: one pattern. Matching every key, it constrains every value; otherwise the
  // keys it matches are the only others allowed (additionalProperties false), and no declared name
  // may match it (that would need the intersection of two schemas for one key).
  std::optional<std::pair<std::string, Json>> pattern_prop;
  if (auto it = s.find("patternProperties"); it != s.end() && it->is_object() && !it->empty()) {
    if (it->size() > 1) {
      return Error{"unsupported keyword 'patternProperties' at '" + ptr + "': more than one pattern"};
    }
    pattern_prop.emplace(it->begin().key(), it->begin().value());
  }
  std::string addl_value;
  std::string pattern_key;  // the key grammar for pattern properties that are not universal
  if (pattern_prop && universal_pattern(pattern_prop->first)) {
    TM_ASSIGN_OR_RETURN(addl_value, gen(pattern_prop->second, pointer_append(ptr, "patternProperties"), depth + 1));
  } else if (pattern_prop) {
    if (!(addl.is_boolean() && !addl.get<bool>())) {
      return Error{"unsupported keyword 'patternProperties' at '" + ptr +
                   "': other keys are allowed too (only additionalProperties false is supported)"};
    }
    if (auto it = s.find("properties"); it != s.end() && it->is_object()) {
      for (auto p = it->begin(); p != it->end(); ++p) {
        auto m = pattern_matches(pattern_prop->first, p.key());
        if (!m.ok() || *m) {
          return Error{"unsupported keyword 'patternProperties' at '" + ptr + "': declared property '" + p.key() +
                       "' matches its pattern"};
        }
      }
    }
    auto r = regex_expr(pattern_prop->first, RegexMode::JsonString, true, json_char());
    if (!r.ok()) return Error{"unsupported keyword 'patternProperties' at '" + ptr + "': " + r.error()};
    pattern_key = "\"\\\"\" " + group(r->expr) + " \"\\\"\"";
    TM_ASSIGN_OR_RETURN(addl_value, gen(pattern_prop->second, pointer_append(ptr, "patternProperties"), depth + 1));
  } else {
    TM_ASSIGN_OR_RETURN(addl_value, gen(addl, addl_ptr, depth + 1));
  }
  const bool extras = addl_value != kNever;

  auto add_prop = [&](const std::string& name, const Json& schema0, const std::string& p) -> Result<bool> {
    names.push_back(name);
    Json schema = schema0;
    if (pattern_prop && universal_pattern(pattern_prop->first)) {
      schema = Json{{"allOf", Json::array({schema0, pattern_prop->second})}};  // the pattern matches it too
    }
    TM_ASSIGN_OR_RETURN(std::string v, gen(schema, p, depth + 1));
    if (v == kNever) return !is_req(name);  // may not appear; required: no object is valid
    props.push_back({name, literal("\"" + json_escape(name) + "\"") + " " + colon() + v, is_req(name)});
    return true;
  };
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) return Error{"'properties' must be an object at '" + ptr + "'"};
    for (auto p = it->begin(); p != it->end(); ++p) {
      TM_ASSIGN_OR_RETURN(bool ok, add_prop(p.key(), p.value(), pointer_append(pointer_append(ptr, "properties"), p.key())));
      if (!ok) return kNever;
    }
  }
  for (auto& r : required) {  // required but not declared: an additional property that must be there
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    Json schema = addl;
    if (pattern_prop && universal_pattern(pattern_prop->first)) {
      schema = true;  // add_prop applies the pattern's schema
    } else if (pattern_prop) {
      auto m = pattern_matches(pattern_prop->first, r);
      if (!m.ok()) return Error{"unsupported keyword 'patternProperties' at '" + ptr + "': " + m.error()};
      if (*m) schema = pattern_prop->second;
    }
    TM_ASSIGN_OR_RETURN(bool ok, add_prop(r, schema, addl_ptr));
    if (!ok) return kNever;
  }

  TM_ASSIGN_OR_RETURN(uint64_t min_p, [&]() -> Result<uint64_t> {
    auto it = s.find("minProperties");
    if (it == s.end()) return uint64_t(0);
    if (!it->is_number()) return Error{"'minProperties' must be a number at '" + ptr + "'"};
    return uint64_t(std::max(0.0, std::ceil(it->get<double>())));
  }());
  std::optional<uint64_t> max_p;
  if (auto it = s.find("maxProperties"); it != s.end()) {
    if (!it->is_number()) return Error{"'maxProperties' must be a number at '" + ptr + "'"};
    max_p = uint64_t(std::max(0.0, std::floor(it->get<double>())));
  }
  const size_t n = props.size();
  size_t n_req = 0;
  for (auto& p : props) n_req += p.required ? 1 : 0;
  if (min_p <= n_req) min_p = 0;  // implied by the required properties
  if (max_p && !extras && *max_p >= n) max_p.reset();
  if (max_p && *max_p < n_req) return kNever;
  if (!extras && min_p > n) return kNever;
  if (max_p && *max_p > 64 && (extras || (options().any_order && n_req < n))) return Error{"unsupported keyword 'maxProperties' at '" + ptr + "': too large"};
  if (min_p > 64) return Error{"unsupported keyword 'minProperties' at '" + ptr + "': too large"};
  auto next = [&](uint64_t c) { return max_p ? c + 1 : std::min<uint64_t>(c + 1, min_p); };
  auto fits = [&](uint64_t c) { return !max_p || c + 1 <= *max_p; };

  // X: a member that may come between the declared ones in order (an additional property; with
  // any_order also an optional declared one).
  std::vector<std::string> x_alts;
  if (extras) {
    std::string key = pattern_key;
    if (key.empty()) {
      TM_ASSIGN_OR_RETURN(key, key_not_in(names));
    }
    x_alts.push_back(key + " " + colon() + addl_value);
  }
  if (options().any_order) {
    for (const Prop& p : props) {
      if (!p.required) x_alts.push_back(p.kv);
    }
  }
  const bool anywhere = !x_alts.empty();
  // The declared properties taken in order (with any_order only the required ones: an optional one
  // has one derivation, through X, so the grammar stays unambiguous).
  std::vector<Prop> ordered;
  for (const Prop& p : props) {
    if (p.required || !options().any_order) ordered.push_back(p);
  }
  const size_t n_ord = ordered.size();
  // Several alternatives (any_order's optional properties) make a rule of their own: X recurs in
  // every A(i,c), and as text each copy would be compiled again.
  const std::string x = x_alts.size() == 1 ? x_alts[0] : x_alts.empty() ? std::string() : rules_.add("obj-x", alts_of(x_alts));
  const std::string hint = "obj";
  std::map<std::tuple<char, size_t, uint64_t>, Part> memo;
  std::function<Part(char, size_t, uint64_t)> build = [&](char kind, size_t i, uint64_t c) -> Part {
    auto key = std::make_tuple(kind, i, c);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    Part out;
    if (kind == 'A' && anywhere && (i == n_ord || kExtrasAnywhere)) {
      Part b = build('B', i, c);
      std::vector<std::string> alts;
      if (fits(c) && next(c) == c) {
        // Saturated count: A(i,c) loops on itself. Alive exactly when B(i,c) is.
        if (!b.dead()) {
          std::string name = rules_.reserve(hint);
          out.ne = name;
          out.nullable = b.nullable;
          memo[key] = out;
          alts.push_back(join(sep() + x, out.ref()));
          if (b.ne) alts.push_back(*b.ne);
          rules_.define(name, alts_of(alts));
        }
        memo[key] = out;
        return out;
      }
      if (fits(c)) {
        Part a = build('A', i, next(c));
        if (!a.dead()) alts.push_back(join(sep() + x, a.ref()));
      }
      if (b.ne) alts.push_back(*b.ne);
      out.nullable = b.nullable;
      if (!alts.empty()) out.ne = rules_.add(hint, alts_of(alts));
      memo[key] = out;
      return out;
    }
    if (kind == 'A') return memo[key] = build('B', i, c);
    // B
    if (i == n_ord) {
      out.nullable = c >= min_p;
      return memo[key] = out;
    }
    std::vector<std::string> alts;
    if (fits(c)) {
      Part a = build('A', i + 1, next(c));
      if (!a.dead()) alts.push_back(join(sep() + ordered[i].kv, a.ref()));
    }
    if (!ordered[i].required) {
      Part b = build('B', i + 1, c);
      if (b.ne) alts.push_back(*b.ne);
      out.nullable = b.nullable;
    }
    if (!alts.empty()) out.ne = rules_.add(hint, alts_of(alts));
    return memo[key] = out;
  };
  // The first member has no comma: G(i) ::= KV_i A(i+1,1) | G(i+1) (p_i optional); or X A(0,1).
  std::vector<std::string> head;
  if (anywhere && fits(0)) {
    Part a = build('A', kExtrasAnywhere ? 0 : n_ord, next(0));
    if (!a.dead()) head.push_back(join(x, a.ref()));
  }
  for (size_t i = 0; i < n_ord && fits(0); ++i) {
    Part a = build('A', i + 1, next(0));
    if (!a.dead()) head.push_back(join(ordered[i].kv, a.ref()));
    if (ordered[i].required) break;
  }
  bool empty_ok = n_req == 0 && min_p == 0;
  const std::string w = ws();
  if (head.empty()) return empty_ok ? "\"{\" " + w + "\"}\"" : kNever;
  std::string h = head.size() == 1 ? head[0] : rules_.add(hint, alts_of(head));
  if (empty_ok) return "\"{\" " + w + "( " + h + " " + w + ")? \"}\"";
  return "\"{\" " + w + h + " " + w + "\"}\"";
}

}  // namespace tmill::grammar::detail
