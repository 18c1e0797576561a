// JSON Schema -> GBNF: the walk over a schema ($ref, allOf/anyOf/oneOf, enum/const, types), the
// shared rules, and the public translators of json_schema.h. Objects, arrays/strings, numbers and
// allOf merging live in json_schema_{object,string,number,merge}.cpp.
#include <algorithm>
#include <cmath>
#include <set>

#include "grammar/json_schema_impl.h"

namespace tmill::grammar::detail {

namespace {

const std::set<std::string>& supported() {
  static const std::set<std::string> k = {
      "type",        "enum",         "const",           "properties",       "required",
      "additionalProperties",        "items",           "prefixItems",      "additionalItems",
      "minItems",    "maxItems",     "minLength",       "maxLength",        "pattern",
      "format",      "minimum",      "maximum",         "exclusiveMinimum", "exclusiveMaximum",
      "multipleOf",  "minProperties", "maxProperties",  "allOf",            "anyOf",
      "oneOf",       "$ref",         kNotInKeyword};
  return k;
}

const std::set<std::string>& unsupported() {
  static const std::set<std::string> k = {
      "not",          "if",              "then",          "else",           "dependentRequired",
      "dependentSchemas", "dependencies", "patternProperties", "propertyNames", "unevaluatedProperties",
      "unevaluatedItems", "contains",    "minContains",   "maxContains",    "uniqueItems",
      "$dynamicRef",  "$recursiveRef"};
  return k;
}

std::string escape_pointer_token(const std::string& t) {
  std::string out;
  for (char c : t) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool is_supported_keyword(const std::string& k) { return supported().count(k) != 0; }

bool is_unsupported_keyword(const std::string& k, const Json& v, const Json& schema) {
  if (!unsupported().count(k)) return false;
  // Forms that constrain nothing.
  if (k == "uniqueItems") {
    if (v.is_boolean() && !v.get<bool>()) return false;
    auto mx = schema.find("maxItems");
    if (mx != schema.end() && mx->is_number() && mx->get<double>() <= 1) return false;
    return true;
  }
  if ((k == "then" || k == "else") && !schema.contains("if")) return false;
  if (k == "if" && !schema.contains("then") && !schema.contains("else")) return false;
  if (k == "patternProperties" && v.is_object() && v.size() == 1) return false;  // gen_object decides
  if ((k == "patternProperties" || k == "dependentRequired" || k == "dependentSchemas" || k == "dependencies") &&
      v.is_object() && v.empty())
    return false;
  if ((k == "unevaluatedProperties" || k == "unevaluatedItems" || k == "propertyNames") && v.is_boolean() &&
      v.get<bool>())
    return false;
  if (k == "propertyNames" && v.is_object() && !has_constraints(v)) return false;
  return true;
}

bool has_constraints(const Json& s) {
  if (s.is_boolean()) return !s.get<bool>();
  if (!s.is_object()) return false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (supported().count(it.key()) || is_unsupported_keyword(it.key(), it.value(), s)) return true;
  }
  return false;
}

std::string pointer_append(const std::string& ptr, const std::string& token) {
  return ptr + "/" + escape_pointer_token(token);
}

Compiler::Compiler(const Json& root, const JsonOptions& opt) : root_(root), opt_(opt) {
  if (root.is_object() && root.contains("$schema") && root["$schema"].is_string()) {
    const std::string d = root["$schema"];
    for (const char* old : {"draft-03", "draft-04", "draft-05", "draft-06", "draft-07"}) {
      if (d.find(old) != std::string::npos) ref_siblings_ignored_ = true;
    }
  }
}

std::string Compiler::tok(const std::string& t) { return literal(t); }

std::string Compiler::ws() {
  if (!opt_.flexible_whitespace) return "";
  auto it = shared_.find("ws");
  if (it == shared_.end()) it = shared_.emplace("ws", rules_.add("ws", "[ \\t\\n\\r]*")).first;
  return it->second + " ";
}

std::string Compiler::sep() { return ws() + "\",\" " + ws(); }
std::string Compiler::colon() { return ws() + "\":\" " + ws(); }

std::string Compiler::json_char() {
  auto it = shared_.find("char");
  if (it == shared_.end()) it = shared_.emplace("char", rules_.add("char", json_char_expr(CpSet::any()))).first;
  return it->second;
}

std::string Compiler::any_string() {
  auto it = shared_.find("string");
  if (it == shared_.end()) it = shared_.emplace("string", rules_.add("string", "\"\\\"\" " + json_char() + "* \"\\\"\"")).first;
  return it->second;
}

std::string Compiler::any_value() {
  auto it = shared_.find("value");
  if (it != shared_.end()) return it->second;
  std::string value = rules_.reserve("value");
  shared_["value"] = value;
  std::string str = any_string();
  std::string w = ws();
  std::string kv = str + " " + colon() + value;
  std::string obj = rules_.add("object", "\"{\" " + w + "( " + kv + " ( " + sep() + kv + " )* " + w + ")? \"}\"");
  std::string arr = rules_.add("array", "\"[\" " + w + "( " + value + " ( " + sep() + value + " )* " + w + ")? \"]\"");
  std::string num = rules_.add("number",
                               "\"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?");
  rules_.define(value, obj + " | " + arr + " | " + str + " | " + num + " | \"true\" | \"false\" | \"null\"");
  return value;
}

Result<std::string> Compiler::run() {
  TM_ASSIGN_OR_RETURN(std::string e, gen(root_, "", 0));
  if (e == kNever) return Error{"the schema accepts no value"};
  return rules_.render(e);
}

Result<std::string> Compiler::gen(const Json& s, const std::string& ptr, int depth) {
  if (depth > 150) return Error{"schema nesting too deep at '" + ptr + "'"};
  if (s.is_boolean()) return s.get<bool>() ? any_value() : kNever;
  if (!s.is_object()) return Error{"a schema must be an object or a boolean at '" + ptr + "'"};
  std::string key = s.dump();
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  if (s.contains("$ref") || s.contains("allOf") || s.contains("anyOf") || s.contains("oneOf")) {
    // These may lead back here (recursive definitions through merged schemas): name the rule
    // first so that the recursion refers to it.
    std::string hint = ptr;
    size_t slash = hint.find_last_of('/');
    if (slash != std::string::npos) hint = hint.substr(slash + 1);
    std::string name = rules_.reserve(hint.empty() ? "s" : hint);
    memo_[key] = name;
    TM_ASSIGN_OR_RETURN(std::string body, gen_body(s, ptr, depth + 1));
    if (body == kNever) {
      memo_[key] = kNever;
      rules_.discard(name);
      return kNever;
    }
    rules_.define(name, body);
    return name;
  }
  TM_ASSIGN_OR_RETURN(std::string body, gen_body(s, ptr, depth + 1));
  std::string out = body;
  if (body != kNever && needs_group(body)) {
    std::string hint = ptr;
    size_t slash = hint.find_last_of('/');
    if (slash != std::string::npos) hint = hint.substr(slash + 1);
    out = rules_.add(hint.empty() ? "s" : hint, body);
  }
  memo_[key] = out;
  return out;
}

Result<std::string> Compiler::gen_ref(const std::string& ref, const std::string& ptr, int depth) {
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return it->second;
  TM_ASSIGN_OR_RETURN(Json target, resolve_ref(ref, ptr));
  std::string hint = ref;
  size_t slash = hint.find_last_of('/');
  if (slash != std::string::npos) hint = hint.substr(slash + 1);
  std::string name = rules_.reserve(hint.empty() ? "ref" : hint);
  ref_rules_[ref] = name;
  std::string tptr = ref.size() > 0 && ref[0] == '#' ? ref.substr(1) : ref;
  TM_ASSIGN_OR_RETURN(std::string body, target.is_object() ? gen_body(target, tptr, depth + 1)
                                                            : gen(target, tptr, depth + 1));
  if (body == kNever) return Error{"the schema at '" + ref + "' (referenced at '" + ptr + "') accepts no value"};
  rules_.define(name, body);
  return name;
}

Result<std::string> Compiler::gen_body(const Json& s, const std::string& ptr, int depth) {
  if (depth > 150) return Error{"schema nesting too deep at '" + ptr + "'"};
  if (s.contains("$ref") && ref_siblings_ignored_) {
    if (!s["$ref"].is_string()) return Error{"'$ref' must be a string at '" + ptr + "'"};
    return gen_ref(s["$ref"].get<std::string>(), ptr, depth);
  }
  if (s.contains("not")) {
    // not: rewritten into a positive schema where it has one (types, absent properties, ...).
    TM_ASSIGN_OR_RETURN(std::optional<Json> pos, negate(s["not"], pointer_append(ptr, "not"), depth));
    if (!pos) return Error{"unsupported keyword 'not' at '" + (ptr.empty() ? "/" : ptr) + "'"};
    Json rest = s;
    rest.erase("not");
    TM_ASSIGN_OR_RETURN(Json merged, merge(rest, *pos, ptr, depth));
    return gen(merged, ptr, depth + 1);
  }
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (is_unsupported_keyword(it.key(), it.value(), s)) {
      return Error{"unsupported keyword '" + it.key() + "' at '" + (ptr.empty() ? "/" : ptr) + "'"};
    }
  }
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) return Error{"'$ref' must be a string at '" + ptr + "'"};
    Json rest = s;
    rest.erase("$ref");
    if (!has_constraints(rest)) return gen_ref(s["$ref"].get<std::string>(), ptr, depth);
    // A $ref with constraints beside it: the merged schema gets its own rule, named before it is
    // generated, so a recursive definition refers back to it instead of unfolding forever.
    std::string key = s["$ref"].get<std::string>() + "\n" + rest.dump();
    if (auto it = ref_rules_.find(key); it != ref_rules_.end()) return it->second;
    TM_ASSIGN_OR_RETURN(Json target, resolve_ref(s["$ref"].get<std::string>(), ptr));
    TM_ASSIGN_OR_RETURN(Json merged, merge(target, rest, ptr, depth));
    std::string name = rules_.reserve("ref");
    ref_rules_[key] = name;
    TM_ASSIGN_OR_RETURN(std::string body, merged.is_object() ? gen_body(merged, ptr, depth + 1) : gen(merged, ptr, depth + 1));
    if (body == kNever) return Error{"the schema at '" + ptr + "' accepts no value"};
    rules_.define(name, body);
    return name;
  }
  if (s.contains("allOf")) {
    const Json& all = s["allOf"];
    if (!all.is_array()) return Error{"'allOf' must be an array at '" + ptr + "'"};
    Json acc = s;
    acc.erase("allOf");
    for (size_t i = 0; i < all.size(); ++i) {
      std::string p = pointer_append(pointer_append(ptr, "allOf"), std::to_string(i));
      TM_ASSIGN_OR_RETURN(Json b, resolve_top(all[i], p, depth));
      TM_ASSIGN_OR_RETURN(acc, merge(acc, b, p, depth));
    }
    return gen(acc, ptr, depth + 1);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return gen_alternatives(s, ptr, depth);
  if (s.contains("enum") || s.contains("const")) return gen_enum(s, ptr);
  return gen_types(s, ptr, depth);
}

namespace {

// The JSON types a schema's values may have: bits null, boolean, object, array, string, integer,
// number (non-integer).
enum : unsigned { kNull = 1, kBool = 2, kObj = 4, kArr = 8, kStr = 16, kInt = 32, kFrac = 64, kAll = 127 };

unsigned type_bit(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "object") return kObj;
  if (t == "array") return kArr;
  if (t == "string") return kStr;
  if (t == "integer") return kInt;
  if (t == "number") return kInt | kFrac;
  return 0;
}

unsigned value_type(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_object()) return kObj;
  if (v.is_array()) return kArr;
  if (v.is_string()) return kStr;
  if (v.is_number_integer()) return kInt;
  double d = v.get<double>();
  return d == std::floor(d) ? kInt : kFrac;
}

unsigned schema_types(const Json& s) {
  if (s.is_boolean()) return s.get<bool>() ? unsigned{kAll} : 0u;
  unsigned t = kAll;
  if (auto it = s.find("type"); it != s.end()) {
    t = 0;
    if (it->is_string()) {
      t = type_bit(it->get<std::string>());
    } else if (it->is_array()) {
      for (auto& x : *it) {
        if (x.is_string()) t |= type_bit(x.get<std::string>());
      }
    }
  }
  auto vals = [&](const Json& list) {
    unsigned u = 0;
    for (auto& v : list) u |= value_type(v);
    return u;
  };
  if (auto it = s.find("const"); it != s.end()) t &= value_type(*it);
  if (auto it = s.find("enum"); it != s.end() && it->is_array()) t &= vals(*it);
  return t;
}

bool values_disjoint(const Json& a, const Json& b) {
  auto list = [](const Json& s, Json& out) {
    if (auto it = s.find("const"); it != s.end()) {
      out = Json::array({*it});
      return true;
    }
    if (auto it = s.find("enum"); it != s.end() && it->is_array()) {
      out = *it;
      return true;
    }
    return false;
  };
  Json la, lb;
  if (!list(a, la) || !list(b, lb)) return false;
  for (auto& x : la) {
    for (auto& y : lb) {
      if (x == y) return false;
    }
  }
  return true;
}

bool is_required(const Json& s, const std::string& name) {
  auto it = s.find("required");
  if (it == s.end() || !it->is_array()) return false;
  return std::find(it->begin(), it->end(), Json(name)) != it->end();
}

// No value is valid against both (conservative: false when not provable).
bool provably_disjoint(const Json& a, const Json& b) {
  if (!a.is_object() || !b.is_object()) return false;
  unsigned ta = schema_types(a), tb = schema_types(b);
  if ((ta & tb) == 0) return true;
  if (values_disjoint(a, b)) return true;
  if ((ta & tb) != kObj) return false;
  // Both objects: a property both require with disjoint values, or one requires what the other forbids.
  auto props = [](const Json& s) { return s.contains("properties") && s["properties"].is_object() ? s["properties"] : Json::object(); };
  Json pa = props(a), pb = props(b);
  for (auto it = pa.begin(); it != pa.end(); ++it) {
    if (pb.contains(it.key()) && is_required(a, it.key()) && is_required(b, it.key()) &&
        (values_disjoint(it.value(), pb[it.key()]) ||
         (schema_types(it.value()) & schema_types(pb[it.key()])) == 0))
      return true;
  }
  auto forbids = [&](const Json& s, const Json& p, const std::string& name) {
    if (p.contains(name)) return p[name].is_boolean() && !p[name].get<bool>();
    auto ap = s.find("additionalProperties");
    return ap != s.end() && ap->is_boolean() && !ap->get<bool>();
  };
  if (a.contains("required") && a["required"].is_array()) {
    for (auto& r : a["required"]) {
      if (r.is_string() && forbids(b, pb, r.get<std::string>())) return true;
    }
  }
  if (b.contains("required") && b["required"].is_array()) {
    for (auto& r : b["required"]) {
      if (r.is_string() && forbids(a, pa, r.get<std::string>())) return true;
    }
  }
  return false;
}

}  // namespace

Result<std::optional<Json>> Compiler::negate(const Json& n0, const std::string& ptr, int depth) const {
  TM_ASSIGN_OR_RETURN(Json n, resolve_top(n0, ptr, depth + 1));
  if (n.is_boolean()) return std::optional<Json>(Json(!n.get<bool>()));
  if (!n.is_object()) return std::optional<Json>();
  if (!has_constraints(n)) return std::optional<Json>(Json(false));
  std::vector<std::string> keys;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (is_supported_keyword(it.key()) || is_unsupported_keyword(it.key(), it.value(), n)) keys.push_back(it.key());
  }
  if (keys.size() != 1) return std::optional<Json>();
  const std::string& k = keys[0];
  const Json& v = n[k];
  if (k == "type") {
    unsigned t = schema_types(Json{{"type", v}});
    Json out = Json::array();
    if (!(t & kNull)) out.push_back("null");
    if (!(t & kBool)) out.push_back("boolean");
    if (!(t & kObj)) out.push_back("object");
    if (!(t & kArr)) out.push_back("array");
    if (!(t & kStr)) out.push_back("string");
    if (!(t & kInt) && !(t & kFrac)) out.push_back("number");
    if (!(t & kInt) && (t & kFrac)) out.push_back("integer");
    if ((t & kInt) && !(t & kFrac)) return std::optional<Json>();  // non-integral numbers only
    if (out.empty()) return std::optional<Json>(Json(false));
    return std::optional<Json>(Json{{"type", out}});
  }
  if (k == "required" && v.is_array() && v.size() == 1 && v[0].is_string()) {
    // Only objects can fail "required": an object without that property.
    Json props = Json::object();
    props[v[0].get<std::string>()] = false;
    return std::optional<Json>(Json{{"type", "object"}, {"properties", props}});
  }
  if (k == "anyOf" && v.is_array()) {
    Json acc = true;
    for (size_t i = 0; i < v.size(); ++i) {
      TM_ASSIGN_OR_RETURN(std::optional<Json> x, negate(v[i], pointer_append(ptr, std::to_string(i)), depth + 1));
      if (!x) return std::optional<Json>();
      TM_ASSIGN_OR_RETURN(acc, merge(acc, *x, ptr, depth + 1));
    }
    return std::optional<Json>(acc);
  }
  if (k == "not") return std::optional<Json>(v);
  if ((k == "enum" && v.is_array()) || k == "const") {
    // Not one of some strings: any other type, or a string outside the set.
    Json strs = k == "const" ? Json::array({v}) : v;
    for (auto& x : strs) {
      if (!x.is_string()) return std::optional<Json>();
    }
    Json others = Json::array({"null", "boolean", "object", "array", "number"});
    Json str = {{"type", "string"}, {kNotInKeyword, strs}};
    return std::optional<Json>(Json{{"anyOf", Json::array({Json{{"type", others}}, str})}});
  }
  return std::optional<Json>();
}

Result<std::string> Compiler::gen_alternatives(const Json& s, const std::string& ptr, int depth) {
  if (s.contains("anyOf") && s.contains("oneOf")) {
    // Both must hold: anyOf over the oneOf-with-siblings.
    Json inner = s;
    inner.erase("anyOf");
    Json outer = Json::object();
    outer["allOf"] = Json::array({inner, Json{{"anyOf", s["anyOf"]}}});
    return gen(outer, ptr, depth + 1);
  }
  const char* kw = s.contains("anyOf") ? "anyOf" : "oneOf";
  const Json& list = s[kw];
  if (!list.is_array() || list.empty()) return Error{std::string("'") + kw + "' must be a non-empty array at '" + ptr + "'"};
  Json base = s;
  base.erase(kw);
  bool merge_base = has_constraints(base);
  std::vector<Json> branches;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string p = pointer_append(pointer_append(ptr, kw), std::to_string(i));
    Json b = list[i];
    if (merge_base || std::string(kw) == "oneOf") {
      TM_ASSIGN_OR_RETURN(b, resolve_top(b, p, depth));
    }
    if (merge_base) {
      TM_ASSIGN_OR_RETURN(b, merge(base, b, p, depth));
    }
    branches.push_back(std::move(b));
  }
  if (std::string(kw) == "oneOf") {
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        if (!provably_disjoint(branches[i], branches[j])) {
          return Error{"unsupported keyword 'oneOf' at '" + pointer_append(ptr, "oneOf") + "': alternatives " +
                       std::to_string(i) + " and " + std::to_string(j) +
                       " may both match, and exactly-one cannot be enforced"};
        }
      }
    }
  }
  std::vector<std::string> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    std::string p = pointer_append(pointer_append(ptr, kw), std::to_string(i));
    TM_ASSIGN_OR_RETURN(std::string e, gen(branches[i], p, depth + 1));
    if (e == kNever) continue;
    if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(e);
  }
  if (alts.empty()) return kNever;
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

std::string Compiler::value_literal(const Json& v) {
  if (v.is_string()) return literal("\"" + json_escape(v.get<std::string>()) + "\"");
  if (v.is_number()) {
    std::string d = v.dump();
    if (opt_.flexible_whitespace && value_type(v) == kInt && d.find_first_of(".eE") == std::string::npos) {
      return "( " + literal(d) + " ( \".\" \"0\"+ )? )";  // 1 and 1.0 are the same number
    }
    if (v.is_number_float() && d.size() > 2 && d.compare(d.size() - 2, 2, ".0") == 0) {
      return "( " + literal(d.substr(0, d.size() - 2)) + " ( \".\" \"0\"+ )? )";
    }
    return literal(d);
  }
  if (v.is_object() || v.is_array()) {
    if (!opt_.flexible_whitespace) {
      // Compact and canonical: keys in the given order, no whitespace.
      std::string out;
      std::vector<std::string> parts;
      if (v.is_array()) {
        std::string e = "\"[\"";
        for (size_t i = 0; i < v.size(); ++i) e += (i ? " \",\" " : " ") + group(value_literal(v[i]));
        return e + " \"]\"";
      }
      std::string e = "\"{\"";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        e += (first ? " " : " \",\" ") + literal("\"" + json_escape(it.key()) + "\"") + " \":\" " +
             group(value_literal(it.value()));
        first = false;
      }
      return e + " \"}\"";
    }
    std::string w = ws();
    if (v.is_array()) {
      std::string e = "\"[\" " + w;
      for (size_t i = 0; i < v.size(); ++i) e += (i ? sep() : "") + group(value_literal(v[i])) + " ";
      return e + (v.empty() ? "" : w) + "\"]\"";
    }
    std::string e = "\"{\" " + w;
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      e += (first ? "" : sep()) + literal("\"" + json_escape(it.key()) + "\"") + " " + colon() +
           group(value_literal(it.value())) + " ";
      first = false;
    }
    return e + (v.empty() ? "" : w) + "\"}\"";
  }
  return literal(v.dump());
}

Result<std::string> Compiler::gen_enum(const Json& s, const std::string& ptr) {
  Json values = Json::array();
  if (s.contains("const")) {
    values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return Error{"'enum' must be an array at '" + ptr + "'"};
      if (std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end()) return kNever;
    }
  } else {
    if (!s["enum"].is_array()) return Error{"'enum' must be an array at '" + ptr + "'"};
    values = s["enum"];
  }
  Json rest = s;
  rest.erase("enum");
  rest.erase("const");
  std::vector<std::string> alts;
  for (auto& v : values) {
    auto ok = quick_validate(v, rest);
    if (!ok) {
      return Error{"unsupported combination of 'enum'/'const' with other keywords at '" + ptr + "'"};
    }
    if (!*ok) continue;
    std::string e = value_literal(v);
    if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(e);
  }
  if (alts.empty()) return kNever;
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

Result<std::string> Compiler::gen_types(const Json& s, const std::string& ptr, int depth) {
  unsigned t = kAll;
  if (auto it = s.find("type"); it != s.end()) {
    t = 0;
    auto one = [&](const Json& x) -> Status {
      if (!x.is_string() || type_bit(x.get<std::string>()) == 0) {
        return Error{"unknown 'type' " + x.dump() + " at '" + ptr + "'"};
      }
      t |= type_bit(x.get<std::string>());
      return ok_status();
    };
    if (it->is_array()) {
      for (auto& x : *it) TM_TRY(one(x));
    } else {
      TM_TRY(one(*it));
    }
  }
  std::vector<std::string> alts;
  auto add = [&](const std::string& e) {
    if (e != kNever) alts.push_back(e);
  };
  if (t & kObj) {
    TM_ASSIGN_OR_RETURN(std::string e, gen_object(s, ptr, depth));
    add(e);
  }
  if (t & kArr) {
    TM_ASSIGN_OR_RETURN(std::string e, gen_array(s, ptr, depth));
    add(e);
  }
  if (t & kStr) {
    TM_ASSIGN_OR_RETURN(std::string e, gen_string(s, ptr));
    add(e);
  }
  if (t & (kInt | kFrac)) {
    TM_ASSIGN_OR_RETURN(std::string e, gen_number(s, ptr, (t & kFrac) == 0));
    add(e);
  }
  if (t & kBool) add("( \"true\" | \"false\" )");
  if (t & kNull) add("\"null\"");
  if (alts.empty()) return kNever;
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// --- the small validator used to filter enum values --------------------------------------------

namespace {
size_t cp_count(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    next_cp(s, i);
    ++n;
  }
  return n;
}
}  // namespace

std::optional<bool> quick_validate(const Json& v, const Json& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return std::nullopt;
  unsigned vt = value_type(v);
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    const Json& x = it.value();
    if (!is_supported_keyword(k) && !is_unsupported_keyword(k, x, s)) continue;  // annotation
    if (k == "type") {
      if ((schema_types(Json{{"type", x}}) & vt) == 0) return false;
    } else if (k == "enum") {
      if (!x.is_array() || std::find(x.begin(), x.end(), v) == x.end()) return false;
    } else if (k == "const") {
      if (x != v) return false;
    } else if (k == kNotInKeyword) {
      if (v.is_string() && x.is_array() && std::find(x.begin(), x.end(), v) != x.end()) return false;
    } else if (k == "minLength" || k == "maxLength" || k == "pattern" || k == "format") {
      if (!v.is_string()) continue;
      if (k == "pattern" || k == "format") return std::nullopt;
      if (!x.is_number()) return std::nullopt;
      double n = double(cp_count(v.get<std::string>()));
      if (k == "minLength" ? n < x.get<double>() : n > x.get<double>()) return false;
    } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (!v.is_number()) continue;
      if (!x.is_number()) return std::nullopt;
      double a = v.get<double>(), b = x.get<double>();
      if ((k == "minimum" && a < b) || (k == "maximum" && a > b) || (k == "exclusiveMinimum" && a <= b) ||
          (k == "exclusiveMaximum" && a >= b))
        return false;
    } else if (k == "multipleOf") {
      if (!v.is_number()) continue;
      if (!v.is_number_integer() || !x.is_number_integer() || x.get<int64_t>() == 0) return std::nullopt;
      if (v.get<int64_t>() % x.get<int64_t>() != 0) return false;
    } else if (k == "minItems" || k == "maxItems" || k == "items" || k == "prefixItems" || k == "additionalItems" ||
               k == "uniqueItems" || k == "contains" || k == "minContains" || k == "maxContains" ||
               k == "unevaluatedItems") {
      if (!v.is_array()) continue;
      return std::nullopt;
    } else if (k == "properties" || k == "required" || k == "additionalProperties" || k == "minProperties" ||
               k == "maxProperties" || k == "patternProperties" || k == "propertyNames" ||
               k == "dependentRequired" || k == "dependentSchemas" || k == "dependencies" ||
               k == "unevaluatedProperties") {
      if (!v.is_object()) continue;
      if (k == "required" && x.is_array()) {
        for (auto& r : x) {
          if (!r.is_string() || !v.contains(r.get<std::string>())) return false;
        }
        continue;
      }
      return std::nullopt;
    } else {
      return std::nullopt;  // $ref, allOf, anyOf, oneOf, not, if ...
    }
  }
  return true;
}

}  // namespace tmill::grammar::detail

namespace tmill::grammar {

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonOptions& opt) {
  detail::Compiler c(schema, opt);
  return c.run();
}

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const JsonOptions& opt) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()), opt);
}

Result<std::string> json_schema_text_to_gbnf(std::string_view schema_text, const JsonOptions& opt) {
  auto j = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (j.is_discarded()) return Error{"the JSON schema is not valid JSON"};
  return json_schema_to_gbnf(j, opt);
}

std::string json_object_gbnf(const JsonOptions& opt) {
  const nlohmann::ordered_json schema = {{"type", "object"}};
  detail::Compiler c(schema, opt);
  auto r = c.run();
  return r.ok() ? *r : std::string();
}

std::string choices_to_gbnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) out += (i ? " | " : "") + detail::literal(choices[i]);
  if (choices.empty()) out += "\"\"";
  return out + "\n";
}

std::string gbnf_literal(std::string_view bytes) { return detail::literal(bytes); }

}  // namespace tmill::grammar
