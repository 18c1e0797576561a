// Shared pieces of the tool-call parsers: the snapshot builder, the JSON prefix scanner, call objects
// and arrays, typed XML arguments, and OPEN/CLOSE blocks.
#include "chat/tool_parse.h"

#include <algorithm>

namespace tmill::toolparse {

using ojson = nlohmann::ordered_json;

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_ws(std::string_view t, size_t p) {
  while (p < t.size() && is_ws(t[p])) ++p;
  return p;
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

size_t find_from(std::string_view t, std::string_view m, size_t pos) { return pos > t.size() ? npos : t.find(m, pos); }

size_t held_end(std::string_view t, size_t from, bool final, std::initializer_list<std::string_view> markers) {
  if (final) return t.size();
  size_t hold = 0;
  for (std::string_view m : markers) {
    const size_t max = std::min(m.size() - 1, t.size() - std::min(from, t.size()));
    for (size_t k = max; k > hold; --k)
      if (t.substr(t.size() - k) == m.substr(0, k)) {
        hold = k;
        break;
      }
  }
  return t.size() - hold;
}

// ---- snapshot ----

void SnapshotBuilder::content(std::string_view s) {
  if (s.empty()) return;
  if (!items_.empty() && !items_.back().is_call) {
    items_.back().text += s;
    return;
  }
  items_.push_back({false, std::string(s), {}});
}

void SnapshotBuilder::call(PartialCall c) { items_.push_back({true, {}, std::move(c)}); }

Snapshot SnapshotBuilder::build(bool final) const {
  Snapshot s;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& it = items_[i];
    if (it.is_call) {
      s.calls.push_back(it.call);
      continue;
    }
    std::string_view t = it.text;
    const bool call_before = i > 0 && items_[i - 1].is_call;
    const bool call_after = i + 1 < items_.size();  // only calls follow a content item (pieces merge)
    if (call_before)
      while (!t.empty() && is_ws(t.front())) t.remove_prefix(1);
    if (call_after || !final)
      while (!t.empty() && is_ws(t.back())) t.remove_suffix(1);
    s.content += t;
  }
  return s;
}

// ---- JSON scanning ----

namespace {

constexpr int kMaxDepth = 64;

JsonScan scan_string(std::string_view t, size_t p) {
  const size_t b = p;
  for (++p; p < t.size(); ++p) {
    const unsigned char c = static_cast<unsigned char>(t[p]);
    if (c == '"') return {Scan::Complete, b, p + 1};
    if (c == '\\') {  // JSON's escapes only: \" \\ \/ \b \f \n \r \t \uXXXX
      if (++p >= t.size()) break;
      const char e = t[p];
      if (e == 'u') {
        for (int k = 0; k < 4; ++k) {
          if (++p >= t.size()) return {Scan::Partial, b, t.size()};
          if (!std::isxdigit(static_cast<unsigned char>(t[p]))) return {Scan::Invalid, b, p};
        }
      } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
        return {Scan::Invalid, b, p};
      }
      continue;
    }
    if (c < 0x20) return {Scan::Invalid, b, p};
  }
  return {Scan::Partial, b, t.size()};
}

JsonScan scan_value(std::string_view t, size_t p, int depth);

JsonScan scan_container(std::string_view t, size_t p, int depth, bool object) {
  const size_t b = p;
  const char close = object ? '}' : ']';
  if (depth > kMaxDepth) return {Scan::Invalid, b, p};
  p = skip_ws(t, p + 1);
  if (p >= t.size()) return {Scan::Partial, b, t.size()};
  if (t[p] == close) return {Scan::Complete, b, p + 1};
  while (true) {
    if (object) {
      if (t[p] != '"') return {Scan::Invalid, b, p};
      JsonScan k = scan_string(t, p);
      if (k.status != Scan::Complete) return {k.status, b, k.end};
      p = skip_ws(t, k.end);
      if (p >= t.size()) return {Scan::Partial, b, t.size()};
      if (t[p] != ':') return {Scan::Invalid, b, p};
      ++p;
    }
    JsonScan v = scan_value(t, p, depth + 1);
    if (v.status != Scan::Complete) return {v.status, b, v.end};
    p = skip_ws(t, v.end);
    if (p >= t.size()) return {Scan::Partial, b, t.size()};
    if (t[p] == close) return {Scan::Complete, b, p + 1};
    if (t[p] != ',') return {Scan::Invalid, b, p};
    p = skip_ws(t, p + 1);
    if (p >= t.size()) return {Scan::Partial, b, t.size()};
  }
}

JsonScan scan_value(std::string_view t, size_t p, int depth) {
  p = skip_ws(t, p);
  if (p >= t.size()) return {Scan::Partial, p, t.size()};
  const char c = t[p];
  if (c == '{' || c == '[') return scan_container(t, p, depth, c == '{');
  if (c == '"') return scan_string(t, p);
  for (std::string_view lit : {std::string_view("true"), std::string_view("false"), std::string_view("null")}) {
    if (c != lit[0]) continue;
    const std::string_view rest = t.substr(p, lit.size());
    if (rest != lit.substr(0, rest.size())) return {Scan::Invalid, p, p};
    return {rest.size() == lit.size() ? Scan::Complete : Scan::Partial, p, p + rest.size()};
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    size_t e = p;
    while (e < t.size() && (std::isdigit(static_cast<unsigned char>(t[e])) || t[e] == '-' || t[e] == '+' ||
                            t[e] == '.' || t[e] == 'e' || t[e] == 'E'))
      ++e;
    if (e >= t.size()) return {Scan::Partial, p, t.size()};  // more digits may come
    // The characters are right; check the shape with the real parser.
    if (!ojson::accept(t.substr(p, e - p))) return {Scan::Invalid, p, e};
    return {Scan::Complete, p, e};
  }
  return {Scan::Invalid, p, p};
}

bool one_of(std::string_view k, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

std::string decode_string(std::string_view raw) {
  try {
    return ojson::parse(raw).get<std::string>();
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

JsonScan scan_json(std::string_view t, size_t p) { return scan_value(t, p, 0); }

const CallKeys kNameArguments{{"name"}, {"arguments", "parameters"}, {}};  // an "id" after the name could not be streamed: ids come from the server

JsonScan read_arguments(std::string_view t, size_t p, PartialCall& call) {
  JsonScan v = scan_json(t, p);
  if (v.status == Scan::Invalid || v.begin >= t.size()) return v;
  if (t[v.begin] != '{' && t[v.begin] != '"') return {Scan::Invalid, v.begin, v.begin};  // arguments are an object
  if (t[v.begin] == '"') {
    // Arguments written as a JSON string holding the JSON: shown once complete, decoded.
    call.arguments = v.status == Scan::Complete ? decode_string(t.substr(v.begin, v.end - v.begin)) : std::string();
    if (v.status == Scan::Complete) {
      const std::string_view a = trim(call.arguments);
      if (a.empty() || a.front() != '{' || !ojson::accept(a)) return {Scan::Invalid, v.begin, v.begin};
    }
  } else {
    call.arguments = std::string(t.substr(v.begin, v.end - v.begin));
    // The scanner checks the shape; the real parser has the last word (e.g. lone \uD800 surrogates).
    if (v.status == Scan::Complete && !ojson::accept(call.arguments)) return {Scan::Invalid, v.begin, v.begin};
  }
  return v;
}

CallObject scan_call_object(std::string_view t, size_t p, const CallKeys& keys) {
  CallObject o;
  p = skip_ws(t, p);
  o.end = t.size();
  if (p >= t.size()) return o;
  if (t[p] != '{') {
    o.status = Scan::Invalid;
    return o;
  }
  bool args_present = false, args_done = false;
  p = skip_ws(t, p + 1);
  auto finish = [&](Scan s, size_t end) {
    o.status = s;
    o.end = end;
    if (s == Scan::Complete && !args_present) o.call.arguments = "{}";
    // Name and complete arguments make a call even if the object is not closed properly (a streamed
    // call has been sent by then).
    o.call.done = o.call.name_known && (args_done || (!args_present && s == Scan::Complete));
    return o;
  };
  if (p >= t.size()) return finish(Scan::Partial, t.size());
  if (t[p] == '}') return finish(Scan::Complete, p + 1);
  while (true) {
    if (t[p] != '"') return finish(Scan::Invalid, p);
    JsonScan k = scan_string(t, p);
    if (k.status != Scan::Complete) return finish(k.status, k.end);
    const std::string key = decode_string(t.substr(k.begin, k.end - k.begin));
    p = skip_ws(t, k.end);
    if (p >= t.size()) return finish(Scan::Partial, t.size());
    if (t[p] != ':') return finish(Scan::Invalid, p);
    p = skip_ws(t, p + 1);
    JsonScan v;
    if (one_of(key, keys.args) && !args_present) {
      args_present = true;
      v = read_arguments(t, p, o.call);
      args_done = v.status == Scan::Complete;
    } else {
      v = scan_json(t, p);
      if (v.status == Scan::Complete && (one_of(key, keys.name) || one_of(key, keys.id))) {
        if (t[v.begin] != '"') return finish(Scan::Invalid, v.begin);
        std::string s = decode_string(t.substr(v.begin, v.end - v.begin));
        if (one_of(key, keys.name)) {
          if (o.call.name_known || s.empty()) return finish(Scan::Invalid, v.begin);
          o.call.name = std::move(s);
          o.call.name_known = true;
        } else {
          o.call.id = std::move(s);
        }
      }
    }
    if (v.status != Scan::Complete) return finish(v.status, v.end);
    p = skip_ws(t, v.end);
    if (p >= t.size()) return finish(Scan::Partial, t.size());
    if (t[p] == '}') return finish(Scan::Complete, p + 1);
    if (t[p] != ',') return finish(Scan::Invalid, p);
    p = skip_ws(t, p + 1);
    if (p >= t.size()) return finish(Scan::Partial, t.size());
  }
}

CallArray scan_call_array(std::string_view t, size_t p, const CallKeys& keys) {
  CallArray a;
  p = skip_ws(t, p);
  a.end = t.size();
  if (p >= t.size()) return a;
  if (t[p] != '[') {
    a.status = Scan::Invalid;
    return a;
  }
  p = skip_ws(t, p + 1);
  if (p < t.size() && t[p] == ']') {
    a.status = Scan::Invalid;  // an empty list calls nothing: not a call block
    return a;
  }
  while (true) {
    CallObject o = scan_call_object(t, p, keys);
    if (o.status == Scan::Invalid || (o.status == Scan::Complete && !o.call.done)) {
      a.status = Scan::Invalid;
      return a;
    }
    a.calls.push_back(std::move(o.call));
    if (o.status == Scan::Partial) return a;
    p = skip_ws(t, o.end);
    if (p >= t.size()) return a;
    if (t[p] == ']') {
      a.status = Scan::Complete;
      a.end = p + 1;
      return a;
    }
    if (t[p] != ',') {
      a.status = Scan::Invalid;
      return a;
    }
    p = skip_ws(t, p + 1);
  }
}

// ---- typed XML arguments ----

namespace {

// The schema of function `fn`'s parameter `param` in an OpenAI tools array, or null.
const ojson* param_schema(const Context& ctx, std::string_view fn, std::string_view param) {
  if (!ctx.tools || !ctx.tools->is_array()) return nullptr;
  for (const ojson& t : *ctx.tools) {
    if (!t.is_object()) continue;
    auto f = t.find("function");
    if (f == t.end() || !f->is_object()) continue;
    auto n = f->find("name");
    if (n == f->end() || !n->is_string() || n->get_ref<const std::string&>() != fn) continue;
    auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return nullptr;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return nullptr;
    auto s = props->find(std::string(param));
    return s == props->end() ? nullptr : &*s;
  }
  return nullptr;
}

bool type_is_string_only(const ojson& schema) {
  auto ty = schema.find("type");
  if (ty == schema.end()) {
    // enum of strings, const string: a string.
    auto en = schema.find("enum");
    if (en != schema.end() && en->is_array() && !en->empty())
      return std::all_of(en->begin(), en->end(), [](const ojson& v) { return v.is_string(); });
    return false;
  }
  if (ty->is_string()) return *ty == "string";
  return false;
}

}  // namespace

std::string typed_argument(const Context& ctx, std::string_view fn, std::string_view param, std::string_view value) {
  const ojson* schema = param_schema(ctx, fn, param);
  if (!(schema && schema->is_object() && type_is_string_only(*schema))) {
    try {
      ojson v = ojson::parse(value);
      // A bare word that happens to parse (true, null, 12) is taken as JSON; so is an object or array.
      return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
    } catch (const std::exception&) {
    }
  }
  return ojson(std::string(value)).dump(-1, ' ', false, ojson::error_handler_t::replace);
}

void append_argument(std::string& args, std::string_view key, const std::string& json_value) {
  args += args.empty() ? "{" : ", ";
  args += ojson(std::string(key)).dump(-1, ' ', false, ojson::error_handler_t::replace);
  args += ": ";
  args += json_value;
}

// ---- OPEN body CLOSE blocks ----

void parse_blocks(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out, std::string_view open,
                  std::string_view close, BodyReader read_body, std::string_view also_hold) {
  size_t pos = 0;
  while (true) {
    const size_t m = find_from(t, open, pos);
    if (m == npos) {
      size_t end = held_end(t, pos, final, {open});
      if (!also_hold.empty()) end = std::min(end, held_end(t, pos, final, {also_hold}));
      out.content(t.substr(pos, end - pos));
      return;
    }
    out.content(t.substr(pos, m - pos));
    const size_t b = m + open.size();
    const size_t e = close.empty() ? npos : find_from(t, close, b);
    const bool closed = e != npos;
    const std::string_view body = t.substr(b, closed ? e - b : npos);
    std::vector<PartialCall> calls;
    const bool ok = read_body(body, closed || final, ctx, calls);
    if (closed || final) {
      const bool good = ok && !calls.empty() &&
                        std::all_of(calls.begin(), calls.end(), [](const PartialCall& c) { return c.done; });
      if (good) {
        for (PartialCall& c : calls) out.call(std::move(c));
      } else {
        out.content(t.substr(m, (closed ? e + close.size() : t.size()) - m));
      }
      if (!closed) return;
      pos = e + close.size();
    } else {
      if (ok)
        for (PartialCall& c : calls) out.call(std::move(c));
      return;  // the block is still being written: nothing after it yet
    }
  }
}

}  // namespace tmill::toolparse
