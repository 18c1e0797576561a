// Tool-call formats that write each argument as tagged text: Qwen3-Coder, GLM-4.5/4.6 and MiniMax-M2.
// Values become JSON typed by the function's parameter schema (typed_argument); a call's arguments grow
// one complete parameter at a time.
#include "chat/tool_parse.h"

namespace tmill::toolparse {

namespace {

bool starts_at(std::string_view t, size_t p, std::string_view m) { return t.compare(p, m.size(), m) == 0; }
bool partial_at(std::string_view t, size_t p, std::string_view m) {
  return p <= t.size() && t.size() - p < m.size() && m.substr(0, t.size() - p) == t.substr(p);
}

bool plain_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (is_ws(c) || c == '<' || c == '>' || c == '"' || c == '=') return false;
  return true;
}

// One trailing and one leading newline around a value are the format's, not the value's.
std::string_view strip_newlines(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

// The shape of one XML family: a call opens with `open` NAME `name_end`, has parameters
// `key_open` KEY `key_close` VALUE `value_close` (GLM: key and value in separate tags), and closes
// with `close` (empty: the end of the block closes it).
struct XmlFormat {
  std::string_view open, name_end, close;
  std::string_view key_open, key_close, value_close;
  bool strip_value_newlines;
};

constexpr XmlFormat kQwen3Coder{"<function=", ">", "</function>", "<parameter=", ">", "</parameter>", true};
constexpr XmlFormat kMinimax{"<invoke name=\"", "\">", "</invoke>", "<parameter name=\"", "\">", "</parameter>", false};

void finish_args(PartialCall& c, const std::string& args) {
  c.arguments = args.empty() ? "{}" : args + "}";
  c.done = true;
}

// Parameters from body[p..] until the call's close. Returns false when malformed; *p ends after close.
// `closed`: no more text will come (a missing close is tolerated then).
bool read_params(std::string_view body, size_t* p, bool closed, const Context& ctx, const XmlFormat& f,
                 PartialCall& c, bool* finished) {
  std::string args;
  *finished = false;
  while (true) {
    size_t r = skip_ws(body, *p);
    if (!f.close.empty() && starts_at(body, r, f.close)) {
      finish_args(c, args);
      *p = r + f.close.size();
      *finished = true;
      return true;
    }
    if (r >= body.size() || (!closed && (partial_at(body, r, f.close) || partial_at(body, r, f.key_open)))) {
      if (closed) {
        finish_args(c, args);
        *p = r;
        *finished = true;
      } else {
        c.arguments = args;
      }
      return true;
    }
    if (!starts_at(body, r, f.key_open)) {
      c.arguments = args;
      return !closed;  // maybe the block's close tag arriving; decided when the block closes
    }
    const size_t k = r + f.key_open.size();
    const size_t ke = find_from(body, f.key_close, k);
    const size_t ve = ke == npos ? npos : find_from(body, f.value_close, ke + f.key_close.size());
    if (ve == npos) {
      c.arguments = args;
      return !closed;
    }
    const std::string_view key = body.substr(k, ke - k);
    if (!plain_name(key)) return false;
    std::string_view value = body.substr(ke + f.key_close.size(), ve - ke - f.key_close.size());
    if (f.strip_value_newlines) value = strip_newlines(value);
    append_argument(args, key, typed_argument(ctx, c.name, key, value));
    c.arguments = args;
    *p = ve + f.value_close.size();
  }
}

// Calls `open NAME name_end params close`, repeated, in one block.
bool read_xml_calls(std::string_view body, bool closed, const Context& ctx, const XmlFormat& f,
                    std::vector<PartialCall>& calls) {
  size_t p = 0;
  while (true) {
    p = skip_ws(body, p);
    if (p >= body.size()) return true;
    if (!starts_at(body, p, f.open)) return !closed;  // decided when the block closes
    const size_t n = p + f.open.size();
    const size_t ne = find_from(body, f.name_end, n);
    PartialCall c;
    if (ne == npos) {
      calls.push_back(std::move(c));
      return !closed;
    }
    const std::string_view name = body.substr(n, ne - n);
    if (!plain_name(name)) return false;
    c.name = std::string(name);
    c.name_known = true;
    p = ne + f.name_end.size();
    bool finished = false;
    if (!read_params(body, &p, closed, ctx, f, c, &finished)) return false;
    calls.push_back(std::move(c));
    if (!finished) return true;
  }
}

bool read_qwen3_coder(std::string_view body, bool closed, const Context& ctx, std::vector<PartialCall>& calls) {
  return read_xml_calls(body, closed, ctx, kQwen3Coder, calls);
}
bool read_minimax(std::string_view body, bool closed, const Context& ctx, std::vector<PartialCall>& calls) {
  return read_xml_calls(body, closed, ctx, kMinimax, calls);
}

// GLM: NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>... up to </tool_call> (one call per block).
bool read_glm(std::string_view body, bool closed, const Context& ctx, std::vector<PartialCall>& calls) {
  static constexpr XmlFormat kGlm{"", "", "", "<arg_key>", "</arg_key>", "</arg_value>", false};
  const size_t b = skip_ws(body, 0);
  size_t ne = body.find('\n', b);
  ne = std::min(ne, find_from(body, "<arg_key>", b));
  PartialCall c;
  if (ne == npos) {
    if (!closed) {
      calls.push_back(std::move(c));
      return true;
    }
    ne = body.size();
  }
  const std::string_view name = trim(body.substr(b, ne - b));
  if (!plain_name(name)) return false;
  c.name = std::string(name);
  c.name_known = true;
  // "<arg_value>" sits between the key's close and the value: fold it into the key's close tag.
  std::string args;
  size_t p = ne;
  while (true) {
    const size_t r = skip_ws(body, p);
    if (r >= body.size() || (!closed && partial_at(body, r, kGlm.key_open))) {
      if (closed) finish_args(c, args);
      else c.arguments = args;
      calls.push_back(std::move(c));
      return true;
    }
    if (!starts_at(body, r, kGlm.key_open)) {
      if (closed) return false;
      c.arguments = args;  // maybe the block's close tag arriving
      calls.push_back(std::move(c));
      return true;
    }
    const size_t k = r + kGlm.key_open.size();
    const size_t ke = find_from(body, kGlm.key_close, k);
    const size_t vo = ke == npos ? npos : skip_ws(body, ke + kGlm.key_close.size());
    const bool value_open = vo != npos && starts_at(body, vo, "<arg_value>");
    const size_t ve = value_open ? find_from(body, kGlm.value_close, vo) : npos;
    if (ve == npos) {
      if (vo != npos && vo < body.size() && !value_open && !partial_at(body, vo, "<arg_value>")) return false;
      c.arguments = args;
      calls.push_back(std::move(c));
      return !closed;
    }
    const std::string_view key = body.substr(k, ke - k);
    if (!plain_name(key)) return false;
    const size_t v = vo + 11;
    append_argument(args, key, typed_argument(ctx, c.name, key, body.substr(v, ve - v)));
    c.arguments = args;
    p = ve + kGlm.value_close.size();
  }
}

}  // namespace

void parse_qwen3_coder(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<tool_call>", "</tool_call>", read_qwen3_coder);
}

void parse_glm45(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<tool_call>", "</tool_call>", read_glm);
}

void parse_minimax_m2(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<minimax:tool_call>", "</minimax:tool_call>", read_minimax);
}

}  // namespace tmill::toolparse
