// Tool-call formats that write calls as JSON objects: Hermes/Qwen, Llama 3.x, Mistral, Granite,
// Command R, FireFunction v2 and functionary v3.2.
#include <algorithm>

#include "chat/tool_parse.h"

namespace tmill::toolparse {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), name_char);
}

// One JSON call object per block.
bool read_object(std::string_view body, bool closed, const Context&, std::vector<PartialCall>& calls) {
  CallObject o = scan_call_object(body, 0, kNameArguments);
  if (o.status == Scan::Invalid && !o.call.done) return false;
  if (closed && !o.call.done) return false;
  calls.push_back(std::move(o.call));
  return true;
}

// A JSON array of call objects per block.
template <const CallKeys& K>
bool read_array(std::string_view body, bool closed, const Context&, std::vector<PartialCall>& calls) {
  if (skip_ws(body, 0) >= body.size()) return !closed;
  CallArray a = scan_call_array(body, 0, K);
  if (a.status == Scan::Invalid || (closed && a.status != Scan::Complete)) return false;
  calls = std::move(a.calls);
  return true;
}

const CallKeys kCommandR{{"tool_name"}, {"parameters"}, {}};

// Mistral: a JSON array (v3, Nemo) or NAME[CALL_ID]ID[ARGS]{..} repeated after [TOOL_CALLS] (v11+).
bool read_mistral(std::string_view body, bool closed, const Context& ctx, std::vector<PartialCall>& calls) {
  size_t p = skip_ws(body, 0);
  if (p >= body.size()) return !closed;
  if (body[p] == '[') return read_array<kNameArguments>(body, closed, ctx, calls);
  static constexpr std::string_view kArgs = "[ARGS]", kId = "[CALL_ID]", kNext = "[TOOL_CALLS]";
  while (true) {
    const size_t a = find_from(body, kArgs, p), i = find_from(body, kId, p);
    const size_t name_end = std::min(a, i);
    PartialCall c;
    if (name_end == npos) {
      // The name is still being written: only name characters so far, or it is not a call.
      std::string_view rest = body.substr(p);
      const size_t bracket = rest.find('[');
      if (!valid_name(rest.substr(0, bracket)) && !(bracket == 0 || rest.empty())) return false;
      calls.push_back(std::move(c));
      return !closed;
    }
    const std::string_view name = trim(body.substr(p, name_end - p));
    if (!valid_name(name)) return false;
    c.name = std::string(name);
    c.name_known = true;
    if (i < a) {
      if (a == npos) {
        c.name_known = false;  // the call starts once its id is known too
        calls.push_back(std::move(c));
        return !closed;
      }
      c.id = std::string(trim(body.substr(i + kId.size(), a - i - kId.size())));
    }
    JsonScan v = read_arguments(body, a + kArgs.size(), c);
    if (v.status == Scan::Invalid) return false;
    c.done = v.status == Scan::Complete && body[v.begin] == '{';
    if (v.status == Scan::Complete && !c.done) return false;
    calls.push_back(std::move(c));
    if (v.status != Scan::Complete) return !closed;
    p = skip_ws(body, v.end);
    if (body.compare(p, kNext.size(), kNext) != 0) return true;  // text after the last call is dropped
    p += kNext.size();
  }
}

// Python keyword arguments of a <|python_tag|>NAME.call(k="v", n=1) builtin call, as a JSON object.
bool python_call(std::string_view s, PartialCall& c) {
  s = trim(s);
  const size_t dot = s.find(".call(");
  if (dot == npos || !valid_name(s.substr(0, dot)) || s.back() != ')') return false;
  c.name = std::string(s.substr(0, dot));
  c.name_known = true;
  std::string_view a = s.substr(dot + 6, s.size() - dot - 7);
  std::string args;
  size_t p = skip_ws(a, 0);
  while (p < a.size()) {
    size_t eq = a.find('=', p);
    if (eq == npos) return false;
    const std::string_view key = trim(a.substr(p, eq - p));
    if (!valid_name(key)) return false;
    p = skip_ws(a, eq + 1);
    if (p >= a.size()) return false;
    std::string value;
    if (a[p] == '"' || a[p] == '\'') {
      const char q = a[p];
      std::string str;
      for (++p; p < a.size() && a[p] != q; ++p) {
        if (a[p] == '\\' && p + 1 < a.size()) ++p;
        str += a[p];
      }
      if (p >= a.size()) return false;
      ++p;
      value = nlohmann::ordered_json(str).dump();
    } else {
      size_t e = p;
      while (e < a.size() && a[e] != ',') ++e;
      std::string_view lit = trim(a.substr(p, e - p));
      if (lit == "True") value = "true";
      else if (lit == "False") value = "false";
      else if (lit == "None") value = "null";
      else if (nlohmann::ordered_json::accept(lit)) value = std::string(lit);
      else return false;
      p = e;
    }
    append_argument(args, key, value);
    p = skip_ws(a, p);
    if (p < a.size()) {
      if (a[p] != ',') return false;
      p = skip_ws(a, p + 1);
    }
  }
  c.arguments = args.empty() ? "{}" : args + "}";
  c.done = true;
  return true;
}

}  // namespace

void parse_hermes(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<tool_call>", "</tool_call>", read_object);
}

void parse_mistral(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "[TOOL_CALLS]", "", read_mistral);
}

void parse_granite(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<|tool_call|>", "", read_array<kNameArguments>);
}

void parse_firefunction(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "functools", "", read_array<kNameArguments>);
}

void parse_command_r(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  // Command R7B: <|START_ACTION|>[..]<|END_ACTION|>; Command R/R+: Action: ```json\n[..]\n```
  if (t.find("<|START_ACTION|>") == npos)
    parse_blocks(t, final, ctx, out, "Action: ```json", "```", read_array<kCommandR>, "<|START_ACTION|>");
  else
    parse_blocks(t, final, ctx, out, "<|START_ACTION|>", "<|END_ACTION|>", read_array<kCommandR>);
}

void parse_llama3_json(std::string_view t, bool final, const Context&, SnapshotBuilder& out) {
  static constexpr std::string_view kTag = "<|python_tag|>";
  size_t p = skip_ws(t, 0);
  const std::string_view rest = t.substr(p);
  if (!final && (rest.empty() || (rest.size() < kTag.size() && kTag.substr(0, rest.size()) == rest))) return;
  const bool tagged = rest.substr(0, kTag.size()) == kTag;
  if (tagged) p = skip_ws(t, p + kTag.size());
  if (!final && tagged && p >= t.size()) return;
  if (p < t.size() && t[p] == '{') {
    // One JSON call, or several separated by ';'. Text that stops being a call is content.
    std::vector<PartialCall> calls;
    auto emit = [&] {
      for (PartialCall& c : calls) out.call(std::move(c));
    };
    while (true) {
      CallObject o = scan_call_object(t, p, kNameArguments);
      const bool bad = o.status == Scan::Invalid || (o.status == Scan::Complete && !o.call.done) ||
                       (o.status == Scan::Partial && final);
      if (bad) {
        const bool first = calls.empty();
        emit();
        out.content(first ? t : t.substr(p));
        return;
      }
      calls.push_back(std::move(o.call));
      if (o.status == Scan::Partial) return emit();
      size_t q = skip_ws(t, o.end);
      if (q < t.size() && t[q] == ';') {
        const size_t r = skip_ws(t, q + 1);
        if (r < t.size() && t[r] == '{') {
          p = r;
          continue;
        }
        if (r >= t.size()) return emit();  // the next call may follow (final: a trailing ';' is dropped)
      }
      emit();
      if (q < t.size()) out.content(t.substr(q));
      return;
    }
  }
  if (tagged) {
    // <|python_tag|>NAME.call(...) (a built-in tool): read once complete.
    if (!final) return;
    PartialCall c;
    if (python_call(t.substr(p), c)) return out.call(std::move(c));
  }
  out.content(t);
}

void parse_functionary(std::string_view t, bool final, const Context&, SnapshotBuilder& out) {
  // The generation prompt ends with ">>>": the output is RECIPIENT\nBODY, further segments after ">>>".
  static constexpr std::string_view kSep = ">>>";
  size_t pos = 0;
  while (true) {
    const size_t nl = t.find('\n', pos);
    if (nl == npos) {
      const std::string_view rec = t.substr(pos);
      if (!final && (rec.empty() || valid_name(rec))) return;  // the recipient is still being written
      if (!(final && rec == "all")) out.content(rec);
      return;
    }
    const std::string_view rec = t.substr(pos, nl - pos);
    if (!valid_name(rec)) {
      out.content(t.substr(pos));  // not this format: all text
      return;
    }
    const size_t body = nl + 1;
    const size_t next = find_from(t, kSep, body);
    const bool closed = next != npos;
    if (rec == "all") {
      const size_t end = closed ? next : held_end(t, body, final, {kSep});
      out.content(t.substr(body, end - body));
    } else {
      const std::string_view seg = t.substr(body, closed ? next - body : npos);
      PartialCall c;
      c.name = std::string(rec);
      c.name_known = true;
      JsonScan v = read_arguments(seg, 0, c);
      c.done = v.status == Scan::Complete && seg[v.begin] == '{';
      if (closed || final) {
        if (c.done) out.call(std::move(c));
        else out.content(t.substr(pos, (closed ? next : t.size()) - pos));
      } else if (v.status != Scan::Invalid) {
        out.call(std::move(c));
      }
    }
    if (!closed) return;
    pos = next + kSep.size();
  }
}

}  // namespace tmill::toolparse
