// $ref resolution (JSON pointers and anchors within the document) and allOf merging: the
// intersection of two schemas as one schema, keyword by keyword; what cannot be intersected
// exactly is an error naming the keyword.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "grammar/json_schema_impl.h"

namespace tmill::grammar::detail {

namespace {

std::string percent_decode(const std::string& s) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int a = hex(s[i + 1]), b = hex(s[i + 2]);
      if (a >= 0 && b >= 0) {
        out += char(a * 16 + b);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

const Json* find_anchor(const Json& node, const std::string& name, int depth) {
  if (depth > 64) return nullptr;
  if (node.is_object()) {
    auto a = node.find("$anchor");
    if (a != node.end() && a->is_string() && a->get<std::string>() == name) return &node;
    auto id = node.find("$id");
    if (id != node.end() && id->is_string() && id->get<std::string>() == "#" + name) return &node;
    auto id4 = node.find("id");
    if (id4 != node.end() && id4->is_string() && id4->get<std::string>() == "#" + name) return &node;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "enum" || it.key() == "const") continue;
      if (const Json* r = find_anchor(it.value(), name, depth + 1)) return r;
    }
  } else if (node.is_array()) {
    for (auto& x : node) {
      if (const Json* r = find_anchor(x, name, depth + 1)) return r;
    }
  }
  return nullptr;
}

}  // namespace

Result<Json> Compiler::resolve_ref(const std::string& ref0, const std::string& ptr) const {
  std::string ref = ref0;
  auto bad = [&](const std::string& why) {
    return Error{"unsupported keyword '$ref' at '" + (ptr.empty() ? "/" : ptr) + "': '" + ref0 + "' " + why};
  };
  if (!ref.empty() && ref[0] != '#') {
    // An absolute reference into this document (its $id) is fine; others are remote.
    std::string id;
    if (root_.is_object() && root_.contains("$id") && root_["$id"].is_string()) id = root_["$id"];
    if (id.empty() && root_.is_object() && root_.contains("id") && root_["id"].is_string()) id = root_["id"];
    while (!id.empty() && id.back() == '#') id.pop_back();
    if (!id.empty() && ref.compare(0, id.size(), id) == 0) {
      ref = ref.substr(id.size());
      if (ref.empty()) ref = "#";
    } else {
      return bad("is not a reference within the document");
    }
    if (ref[0] != '#') return bad("is not a reference within the document");
  }
  if (ref.empty()) ref = "#";
  std::string frag = percent_decode(ref.substr(1));
  if (!frag.empty() && frag[0] != '/') {
    const Json* a = find_anchor(root_, frag, 0);
    if (!a) return bad("names no anchor of the document");
    return *a;
  }
  const Json* cur = &root_;
  size_t i = 0;
  while (i < frag.size()) {
    size_t j = frag.find('/', i + 1);
    std::string tokn = frag.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
    std::string t;
    for (size_t k = 0; k < tokn.size(); ++k) {
      if (tokn[k] == '~' && k + 1 < tokn.size() && (tokn[k + 1] == '0' || tokn[k + 1] == '1')) {
        t += tokn[k + 1] == '0' ? '~' : '/';
        ++k;
      } else {
        t += tokn[k];
      }
    }
    if (cur->is_object()) {
      auto it = cur->find(t);
      if (it == cur->end()) return bad("points nowhere");
      cur = &*it;
    } else if (cur->is_array()) {
      char* end = nullptr;
      unsigned long idx = std::strtoul(t.c_str(), &end, 10);
      if (t.empty() || *end || idx >= cur->size()) return bad("points nowhere");
      cur = &(*cur)[idx];
    } else {
      return bad("points nowhere");
    }
    if (j == std::string::npos) break;
    i = j;
  }
  return *cur;
}

Result<Json> Compiler::resolve_top(const Json& s0, const std::string& ptr, int depth) const {
  Json s = s0;
  for (int n = 0; s.is_object() && s.contains("$ref"); ++n) {
    if (n > 32 || depth > 150) return Error{"'$ref' cycle at '" + ptr + "'"};
    if (!s["$ref"].is_string()) return Error{"'$ref' must be a string at '" + ptr + "'"};
    TM_ASSIGN_OR_RETURN(Json t, resolve_ref(s["$ref"].get<std::string>(), ptr));
    Json rest = s;
    rest.erase("$ref");
    if (has_constraints(rest)) {
      TM_ASSIGN_OR_RETURN(s, merge(t, rest, ptr, depth + 1));
    } else {
      s = std::move(t);
    }
  }
  return s;
}

namespace {

Json type_list(const Json& t) {
  if (t.is_array()) return t;
  return Json::array({t});
}

bool is_annotation_key(const std::string& k) {
  return !is_supported_keyword(k) && k != "not" && k != "if" && k != "then" && k != "else" && k != "dependentRequired" &&
         k != "dependentSchemas" && k != "dependencies" && k != "patternProperties" && k != "propertyNames" &&
         k != "unevaluatedProperties" && k != "unevaluatedItems" && k != "contains" && k != "minContains" &&
         k != "maxContains" && k != "uniqueItems" && k != "$dynamicRef" && k != "$recursiveRef";
}

Json all_of(const Json& a, const Json& b) {
  if (a == b) return a;
  if (a.is_boolean() && a.get<bool>()) return b;
  if (b.is_boolean() && b.get<bool>()) return a;
  if ((a.is_boolean() && !a.get<bool>()) || (b.is_boolean() && !b.get<bool>())) return false;
  return Json{{"allOf", Json::array({a, b})}};
}

}  // namespace

Result<Json> Compiler::merge(const Json& a0, const Json& b0, const std::string& ptr, int depth) const {
  if (depth > 150) return Error{"schema nesting too deep at '" + ptr + "'"};
  TM_ASSIGN_OR_RETURN(Json a, resolve_top(a0, ptr, depth + 1));
  TM_ASSIGN_OR_RETURN(Json b, resolve_top(b0, ptr, depth + 1));
  if (a.is_boolean()) return a.get<bool>() ? b : Json(false);
  if (b.is_boolean()) return b.get<bool>() ? a : Json(false);
  if (!a.is_object() || !b.is_object()) return Error{"a schema must be an object or a boolean at '" + ptr + "'"};
  auto cannot = [&](const std::string& k) {
    return Error{"unsupported keyword 'allOf' at '" + (ptr.empty() ? "/" : ptr) + "': cannot combine two different '" +
                 k + "'"};
  };
  auto has_pp = [](const Json& x) {
    return x.contains("patternProperties") && x["patternProperties"].is_object() && !x["patternProperties"].empty();
  };
  if ((has_pp(a) && b.contains("properties")) || (has_pp(b) && a.contains("properties")) ||
      (has_pp(a) && has_pp(b) && a["patternProperties"] != b["patternProperties"])) {
    return cannot("patternProperties");
  }
  Json out = a;
  // Properties one side declares meet the other side's additionalProperties.
  Json pa = a.contains("properties") && a["properties"].is_object() ? a["properties"] : Json::object();
  Json pb = b.contains("properties") && b["properties"].is_object() ? b["properties"] : Json::object();
  bool any_props = a.contains("properties") || b.contains("properties");
  Json props = Json::object();
  for (auto it = pa.begin(); it != pa.end(); ++it) {
    if (pb.contains(it.key())) {
      props[it.key()] = all_of(it.value(), pb[it.key()]);
    } else if (b.contains("additionalProperties")) {
      props[it.key()] = all_of(it.value(), b["additionalProperties"]);
    } else {
      props[it.key()] = it.value();
    }
  }
  for (auto it = pb.begin(); it != pb.end(); ++it) {
    if (pa.contains(it.key())) continue;
    props[it.key()] = a.contains("additionalProperties") ? all_of(it.value(), a["additionalProperties"]) : it.value();
  }
  if (any_props) out["properties"] = props;

  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& k = it.key();
    const Json& vb = it.value();
    if (k == "properties") continue;
    if (!out.contains(k)) {
      out[k] = vb;
      continue;
    }
    const Json va = out[k];
    if (va == vb) continue;
    if (is_annotation_key(k) || k == "$defs" || k == "definitions") continue;
    if (k == "type") {
      Json t = Json::array();
      for (auto& x : type_list(va)) {
        for (auto& y : type_list(vb)) {
          if (x == y) {
            t.push_back(x);
          } else if (x == "integer" && y == "number") {
            t.push_back(x);
          } else if (x == "number" && y == "integer") {
            t.push_back(y);
          }
        }
      }
      if (t.empty()) return Json(false);
      out[k] = t.size() == 1 ? t[0] : t;
    } else if (k == "required") {
      Json r = va;
      for (auto& x : vb) {
        if (std::find(r.begin(), r.end(), x) == r.end()) r.push_back(x);
      }
      out[k] = r;
    } else if (k == "additionalProperties" || k == "items" || k == "additionalItems" || k == "propertyNames" ||
               k == "unevaluatedProperties" || k == "unevaluatedItems") {
      if (va.is_array() || vb.is_array()) return cannot(k);
      out[k] = all_of(va, vb);
    } else if (k == "prefixItems") {
      if (!va.is_array() || !vb.is_array() || va.size() != vb.size()) return cannot(k);
      Json p = Json::array();
      for (size_t i = 0; i < va.size(); ++i) p.push_back(all_of(va[i], vb[i]));
      out[k] = p;
    } else if (k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties") {
      if (!va.is_number() || !vb.is_number()) return cannot(k);
      out[k] = va.get<double>() >= vb.get<double>() ? va : vb;
    } else if (k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") {
      if (!va.is_number() || !vb.is_number()) return cannot(k);
      out[k] = va.get<double>() <= vb.get<double>() ? va : vb;
    } else if (k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (!va.is_number() || !vb.is_number()) return cannot(k);
      bool mn = k == "exclusiveMinimum";
      out[k] = (va.get<double>() >= vb.get<double>()) == mn ? va : vb;
    } else if (k == "enum") {
      if (!va.is_array() || !vb.is_array()) return cannot(k);
      Json e = Json::array();
      for (auto& x : va) {
        if (std::find(vb.begin(), vb.end(), x) != vb.end()) e.push_back(x);
      }
      if (e.empty()) return Json(false);
      out[k] = e;
    } else if (k == "const") {
      return Json(false);  // va != vb
    } else if (k == "allOf") {
      Json l = va;
      for (auto& x : vb) l.push_back(x);
      out[k] = l;
    } else if (k == "anyOf" || k == "oneOf") {
      if (!va.is_array() || !vb.is_array() || va.size() * vb.size() > 64) return cannot(k);
      // (A1|A2) & (B1|B2) = A1&B1 | A1&B2 | ...; disjoint sets stay disjoint.
      Json l = Json::array();
      for (auto& x : va) {
        for (auto& y : vb) l.push_back(all_of(x, y));
      }
      out[k] = l;
    } else if (k == kNotInKeyword) {
      Json l = va;
      for (auto& x : vb) l.push_back(x);
      out[k] = l;
    } else if (k == "not") {
      out[k] = Json{{"anyOf", Json::array({va, vb})}};  // not A and not B = not (A or B)
    } else if (k == "multipleOf") {
      if (va.is_number_integer() && vb.is_number_integer() && va.get<int64_t>() > 0 && vb.get<int64_t>() > 0) {
        int64_t x = va.get<int64_t>(), y = vb.get<int64_t>();
        int64_t g = std::gcd(x, y);
        out[k] = x / g * y;
      } else {
        return cannot(k);
      }
    } else {
      return cannot(k);
    }
  }
  return out;
}

}  // namespace tmill::grammar::detail
