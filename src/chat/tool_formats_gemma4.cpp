// Gemma 4's tool calls: <|tool_call>call:NAME{key:VALUE,...}<tool_call|>, one block per call, the
// arguments in the syntax its chat template writes them in -- strings between <|"|> markers (no
// escapes), bare keys (or <|"|>-quoted ones, as the template writes nested declarations), numbers,
// true/false/null, {..} and [..] -- turned into JSON. Also taken: JSON's own quoted keys and strings
// (what the forced-call grammar has the model write, server/tool_grammar.cpp) and Python's
// True/False/None (the template prints a value it does not know with Python's str()).
#include <nlohmann/json.hpp>

#include "chat/tool_parse.h"

namespace tmill::toolparse {

namespace {

constexpr std::string_view kQuote = "<|\"|>";
constexpr int kMaxDepth = 64;  // (hostile nesting)

bool starts_at(std::string_view t, size_t p, std::string_view m) { return t.compare(p, m.size(), m) == 0; }
bool partial_at(std::string_view t, size_t p, std::string_view m) {
  return p <= t.size() && t.size() - p < m.size() && m.substr(0, t.size() - p) == t.substr(p);
}

struct Read {
  Scan status;
  size_t end = 0;
};

Read value(std::string_view t, size_t p, int depth, nlohmann::ordered_json& out);

// A string at t[p]: <|"|>raw<|"|>, or a JSON string.
Read string_at(std::string_view t, size_t p, std::string& out) {
  if (starts_at(t, p, kQuote)) {
    const size_t e = t.find(kQuote, p + kQuote.size());
    if (e == npos) return {Scan::Partial};
    out = std::string(t.substr(p + kQuote.size(), e - p - kQuote.size()));
    return {Scan::Complete, e + kQuote.size()};
  }
  if (partial_at(t, p, kQuote)) return {Scan::Partial};
  if (p < t.size() && t[p] == '"') {
    const JsonScan s = scan_json(t, p);
    if (s.status != Scan::Complete) return {s.status};
    out = nlohmann::json::parse(t.substr(s.begin, s.end - s.begin)).get<std::string>();
    return {Scan::Complete, s.end};
  }
  return {Scan::Invalid};
}

// {key:value,...} at t[p] ('{' there)
Read dict(std::string_view t, size_t p, int depth, nlohmann::ordered_json& out) {
  out = nlohmann::ordered_json::object();
  p = skip_ws(t, p + 1);
  if (p < t.size() && t[p] == '}') return {Scan::Complete, p + 1};
  while (true) {
    if (p >= t.size()) return {Scan::Partial};
    std::string key;
    if (t[p] == '"' || starts_at(t, p, kQuote) || partial_at(t, p, kQuote)) {
      const Read k = string_at(t, p, key);
      if (k.status != Scan::Complete) return k;
      p = skip_ws(t, k.end);
      if (p >= t.size()) return {Scan::Partial};
      if (t[p] != ':') return {Scan::Invalid};
    } else {  // bare: up to ':' (llama.cpp's [^:}]+)
      size_t e = p;
      while (e < t.size() && t[e] != ':' && t[e] != '}' && t[e] != ',' && t[e] != '{' && t[e] != '<') ++e;
      if (e >= t.size()) return {Scan::Partial};
      if (t[e] != ':') return {Scan::Invalid};
      key = std::string(trim(t.substr(p, e - p)));
      if (key.empty()) return {Scan::Invalid};
      p = e;
    }
    nlohmann::ordered_json v;
    const Read r = value(t, p + 1, depth + 1, v);
    if (r.status != Scan::Complete) return r;
    out[key] = std::move(v);
    p = skip_ws(t, r.end);
    if (p >= t.size()) return {Scan::Partial};
    if (t[p] == '}') return {Scan::Complete, p + 1};
    if (t[p] != ',') return {Scan::Invalid};
    p = skip_ws(t, p + 1);
  }
}

Read array(std::string_view t, size_t p, int depth, nlohmann::ordered_json& out) {
  out = nlohmann::ordered_json::array();
  p = skip_ws(t, p + 1);
  if (p < t.size() && t[p] == ']') return {Scan::Complete, p + 1};
  while (true) {
    nlohmann::ordered_json v;
    const Read r = value(t, p, depth + 1, v);
    if (r.status != Scan::Complete) return r;
    out.push_back(std::move(v));
    p = skip_ws(t, r.end);
    if (p >= t.size()) return {Scan::Partial};
    if (t[p] == ']') return {Scan::Complete, p + 1};
    if (t[p] != ',') return {Scan::Invalid};
    p = p + 1;
  }
}

Read value(std::string_view t, size_t p, int depth, nlohmann::ordered_json& out) {
  if (depth > kMaxDepth) return {Scan::Invalid};
  p = skip_ws(t, p);
  if (p >= t.size()) return {Scan::Partial};
  if (t[p] == '{') return dict(t, p, depth, out);
  if (t[p] == '[') return array(t, p, depth, out);
  if (t[p] == '"' || t[p] == '<') {
    std::string s;
    const Read r = string_at(t, p, s);
    if (r.status == Scan::Complete) out = s;
    return r;
  }
  // a literal: up to the next separator
  size_t e = p;
  while (e < t.size() && t[e] != ',' && t[e] != '}' && t[e] != ']' && !is_ws(t[e])) ++e;
  if (e >= t.size()) return {Scan::Partial};  // (a number may go on)
  const std::string_view lit = t.substr(p, e - p);
  if (lit == "true" || lit == "True") out = true;
  else if (lit == "false" || lit == "False") out = false;
  else if (lit == "null" || lit == "None") out = nullptr;
  else {
    const JsonScan s = scan_json(t, p);
    if (s.status != Scan::Complete || s.end != e || (t[p] != '-' && (t[p] < '0' || t[p] > '9'))) return {Scan::Invalid};
    out = nlohmann::ordered_json::parse(lit);
  }
  return {Scan::Complete, e};
}

bool plain_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (is_ws(c) || c == '<' || c == '>' || c == '"' || c == '{' || c == '}') return false;
  return true;
}

// One block's body: call:NAME{...}. The arguments come whole, once the object is complete.
bool read_gemma4(std::string_view body, bool closed, const Context&, std::vector<PartialCall>& calls) {
  static constexpr std::string_view kCall = "call:";
  PartialCall c;
  const size_t b = skip_ws(body, 0);
  if (!starts_at(body, b, kCall)) {
    if (closed || !partial_at(body, b, kCall)) return false;
    calls.push_back(std::move(c));
    return true;
  }
  const size_t n = b + kCall.size();
  const size_t brace = body.find('{', n);
  if (brace == npos) {
    if (closed) return false;
    calls.push_back(std::move(c));  // (the name is still being written)
    return true;
  }
  const std::string_view name = trim(body.substr(n, brace - n));
  if (!plain_name(name)) return false;
  c.name = std::string(name);
  c.name_known = true;
  nlohmann::ordered_json args;
  const Read r = dict(body, brace, 0, args);
  if (r.status == Scan::Invalid || (r.status == Scan::Complete && skip_ws(body, r.end) < body.size())) return false;
  if (r.status == Scan::Partial) {
    if (closed) return false;
  } else {
    c.arguments = args.dump();
    c.done = true;
  }
  calls.push_back(std::move(c));
  return true;
}

}  // namespace

void parse_gemma4(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<|tool_call>", "<tool_call|>", read_gemma4);
}

}  // namespace tmill::toolparse
