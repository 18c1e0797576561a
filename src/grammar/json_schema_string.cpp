// Strings (minLength/maxLength in code points, pattern, format) and arrays (items, prefixItems,
// additionalItems, minItems/maxItems).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "grammar/json_schema_impl.h"
#include "grammar/regex.h"

namespace tmill::grammar::detail {

namespace {

// Formats as anchored regular expressions (checked like Python's and Rust's jsonschema validators,
// never looser: RFC 3339 dates with real month lengths and leap years, hostnames of at most 253
// characters).
const std::map<std::string, std::string>& format_regexes() {
  static const std::map<std::string, std::string> m = [] {
    const std::string leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    const std::string date = "(?:" + leap + "-02-29|[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|" +
                             "(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8])))";
    const std::string time =
        "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    const std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    const std::string ipv4 = "(?:" + octet + "\\.){3}" + octet;
    const std::string h = "[0-9a-fA-F]{1,4}";
    const std::string ls32 = "(?:" + h + ":" + h + "|" + ipv4 + ")";
    const std::string ipv6 = "(?:(?:" + h + ":){6}" + ls32 + "|::(?:" + h + ":){5}" + ls32 + "|(?:" + h + ")?::(?:" + h +
                             ":){4}" + ls32 + "|(?:(?:" + h + ":){0,1}" + h + ")?::(?:" + h + ":){3}" + ls32 +
                             "|(?:(?:" + h + ":){0,2}" + h + ")?::(?:" + h + ":){2}" + ls32 + "|(?:(?:" + h +
                             ":){0,3}" + h + ")?::" + h + ":" + ls32 + "|(?:(?:" + h + ":){0,4}" + h + ")?::" + ls32 +
                             "|(?:(?:" + h + ":){0,5}" + h + ")?::" + h + "|(?:(?:" + h + ":){0,6}" + h + ")?::)";
    // At most 4 labels, the first up to 61 characters: never longer than 253.
    const std::string label63 = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    const std::string label61 = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,59}[A-Za-z0-9])?";
    const std::string host = label61 + "(?:\\." + label63 + "){0,3}";
    const std::string uchar = "(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@/?#\\[\\]]|%[0-9A-Fa-f]{2})";
    const std::string dur_time = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
    std::map<std::string, std::string> f;
    f["date"] = date;
    f["time"] = time;
    f["date-time"] = date + "T" + time;
    f["uuid"] = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
    f["ipv4"] = ipv4;
    f["ipv6"] = ipv6;
    f["hostname"] = host;
    f["email"] = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" + host;
    f["uri"] = "[A-Za-z][A-Za-z0-9+.-]*:" + uchar + "*";
    f["uri-reference"] = "(?:[A-Za-z][A-Za-z0-9+.-]*:" + uchar + "*|(?:[A-Za-z0-9\\-._~!$&'()*+,;=@/?#]|%[0-9A-Fa-f]{2})*)";
    f["duration"] = "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:" + dur_time + ")?|" +
                    dur_time + "|[0-9]+W)";
    f["json-pointer"] = "(?:/(?:[^~/]|~[01])*)*";
    return f;
  }();
  return m;
}

// Formats the validators check that this compiler does not: an error, never ignored.
bool is_checked_format(const std::string& f) {
  return f == "idn-email" || f == "idn-hostname" || f == "iri" || f == "iri-reference" || f == "uri-template" ||
         f == "relative-json-pointer" || f == "regex";
}

Result<uint64_t> count_keyword(const Json& s, const char* k, const std::string& ptr, uint64_t dflt) {
  auto it = s.find(k);
  if (it == s.end()) return dflt;
  if (!it->is_number() || it->get<double>() < 0) {
    return Error{std::string("'") + k + "' must be a non-negative number at '" + ptr + "'"};
  }
  double d = it->get<double>();
  if (d > 1e15) return kUnbounded;
  return std::string(k).compare(0, 3, "min") == 0 ? uint64_t(std::ceil(d)) : uint64_t(std::floor(d));
}

std::string repeat(const std::string& e, uint64_t mn, uint64_t mx) {
  std::string g = group(e);
  if (mx == 0) return "";
  if (mn == 0 && mx == kUnbounded) return g + "*";
  if (mn == 1 && mx == kUnbounded) return g + "+";
  if (mn == 0 && mx == 1) return g + "?";
  if (mn == 1 && mx == 1) return e;
  if (mx == kUnbounded) return g + "{" + std::to_string(mn) + ",}";
  if (mn == mx) return g + "{" + std::to_string(mn) + "}";
  return g + "{" + std::to_string(mn) + "," + std::to_string(mx) + "}";
}

}  // namespace

Result<std::string> Compiler::gen_string(const Json& s, const std::string& ptr) {
  TM_ASSIGN_OR_RETURN(uint64_t mn, count_keyword(s, "minLength", ptr, 0));
  TM_ASSIGN_OR_RETURN(uint64_t mx, count_keyword(s, "maxLength", ptr, kUnbounded));
  if (mn > mx) return kNever;
  const std::string q = "\"\\\"\"";
  if (auto it = s.find(kNotInKeyword); it != s.end()) {
    if (s.contains("pattern") || s.contains("format") || mn > 0 || mx != kUnbounded) {
      return Error{"unsupported keyword 'not' at '" + ptr + "': an excluded enum beside pattern, format or length"};
    }
    std::vector<std::string> names;
    for (auto& x : *it) names.push_back(x.get<std::string>());
    return key_not_in(names);
  }
  std::string pattern;
  const char* from = nullptr;
  bool search = true;
  if (auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) return Error{"'pattern' must be a string at '" + ptr + "'"};
    pattern = it->get<std::string>();
    from = "pattern";
  }
  if (auto it = s.find("format"); it != s.end() && it->is_string()) {
    const std::string f = it->get<std::string>();
    auto fr = format_regexes().find(f);
    if (fr != format_regexes().end()) {
      if (from) {
        return Error{"unsupported keyword 'format' at '" + ptr + "': format '" + f +
                     "' together with 'pattern' cannot be enforced"};
      }
      pattern = fr->second;
      from = "format";
      search = false;
    } else if (is_checked_format(f)) {
      return Error{"unsupported keyword 'format' at '" + ptr + "': format '" + f + "' is not supported"};
    }
  }
  if (from) {
    auto r = regex_expr(pattern, RegexMode::JsonString, search, json_char(), mn, mx);
    if (!r.ok()) {
      if (r.error().find("matches nothing") != std::string::npos) return kNever;
      return Error{"unsupported keyword '" + std::string(from) + "' at '" + ptr + "': " + r.error()};
    }
    return q + " " + group(r->expr) + " " + q;
  }
  if (mn == 0 && mx == kUnbounded) return any_string();
  return q + " " + repeat(json_char(), mn, mx) + " " + q;
}

Result<std::string> Compiler::gen_array(const Json& s, const std::string& ptr, int depth) {
  TM_ASSIGN_OR_RETURN(uint64_t mn, count_keyword(s, "minItems", ptr, 0));
  TM_ASSIGN_OR_RETURN(uint64_t mx, count_keyword(s, "maxItems", ptr, kUnbounded));
  std::vector<std::string> prefix;
  Json rest = true;
  std::string rest_ptr = pointer_append(ptr, "items");
  const Json* pre = nullptr;
  std::string pre_ptr;
  if (auto it = s.find("prefixItems"); it != s.end()) {
    pre = &*it;
    pre_ptr = pointer_append(ptr, "prefixItems");
    if (auto i2 = s.find("items"); i2 != s.end()) rest = *i2;
  } else if (auto i2 = s.find("items"); i2 != s.end() && i2->is_array()) {
    pre = &*i2;  // draft 4-2019 tuple form
    pre_ptr = rest_ptr;
    if (auto a = s.find("additionalItems"); a != s.end()) {
      rest = *a;
      rest_ptr = pointer_append(ptr, "additionalItems");
    }
  } else if (i2 != s.end()) {
    rest = *i2;
  }
  if (pre) {
    if (!pre->is_array()) return Error{"'prefixItems' must be an array at '" + ptr + "'"};
    for (size_t i = 0; i < pre->size(); ++i) {
      TM_ASSIGN_OR_RETURN(std::string e, gen((*pre)[i], pointer_append(pre_ptr, std::to_string(i)), depth + 1));
      if (e == kNever) {
        mx = std::min<uint64_t>(mx, i);
        break;
      }
      prefix.push_back(e);
    }
  }
  TM_ASSIGN_OR_RETURN(std::string item, gen(rest, rest_ptr, depth + 1));
  if (item == kNever) mx = std::min<uint64_t>(mx, prefix.size());
  if (prefix.size() > mx) prefix.resize(mx);
  if (mn > mx) return kNever;
  const std::string w = ws();
  // tail(k): the elements after the first k, with k >= 1 already written.
  std::function<std::string(uint64_t)> tail = [&](uint64_t k) -> std::string {
    if (k < prefix.size()) {
      std::string t = tail(k + 1);
      std::string e = sep() + prefix[k] + (t.empty() ? "" : " " + t);
      return k >= mn ? "( " + e + " )?" : e;
    }
    if (k >= mx) return "";
    uint64_t a = mn > k ? mn - k : 0;
    uint64_t b = mx == kUnbounded ? kUnbounded : mx - k;
    return repeat(sep() + item, a, b);
  };
  if (mx == 0) return "\"[\" " + w + "\"]\"";
  std::string first = prefix.empty() ? item : prefix[0];
  std::string t = tail(1);
  std::string body = first + (t.empty() ? "" : " " + t) + " " + w;
  if (mn == 0) return "\"[\" " + w + "( " + body + ")? \"]\"";
  return "\"[\" " + w + body + "\"]\"";
}

}  // namespace tmill::grammar::detail
