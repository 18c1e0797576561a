// Tool-call formats framed by special tokens around JSON arguments: DeepSeek V3/R1 and V3.1,
// Kimi-K2, and gpt-oss's harmony messages.
#include "chat/tool_parse.h"

namespace tmill::toolparse {

namespace {

bool starts_at(std::string_view t, size_t p, std::string_view m) { return t.compare(p, m.size(), m) == 0; }
// t[p..] is a proper prefix of m (the marker is still being written).
bool partial_at(std::string_view t, size_t p, std::string_view m) {
  return p <= t.size() && t.size() - p < m.size() && m.substr(0, t.size() - p) == t.substr(p);
}

struct CallMarkers {
  std::string_view begin, sep, end;
};

// How a call's head (the text between begin and sep) and the text after sep become name and arguments.
// Returns where the arguments' JSON starts in `body`, or npos while unknown; false when malformed.
using HeadFn = bool (*)(std::string_view body, std::string_view head, size_t after_sep, bool closed, PartialCall& c,
                        size_t* args_at);

// BEGIN head SEP args END, repeated (whitespace between calls allowed).
bool read_marked_calls(std::string_view body, bool closed, const CallMarkers& mk, HeadFn head_fn,
                       std::vector<PartialCall>& calls) {
  size_t p = 0;
  while (true) {
    p = skip_ws(body, p);
    if (p >= body.size()) return true;
    if (!starts_at(body, p, mk.begin)) return !closed;  // decided when the block closes
    p += mk.begin.size();
    PartialCall c;
    const size_t s = find_from(body, mk.sep, p);
    if (s == npos) {
      calls.push_back(std::move(c));
      return !closed;
    }
    size_t args_at = npos;
    if (!head_fn(body, trim(body.substr(p, s - p)), s + mk.sep.size(), closed, c, &args_at)) return false;
    if (args_at == npos) {
      calls.push_back(std::move(c));
      return !closed;
    }
    JsonScan v = read_arguments(body, args_at, c);
    if (v.status == Scan::Invalid || (v.status == Scan::Complete && body[v.begin] != '{')) return false;
    if (v.status == Scan::Partial) {
      calls.push_back(std::move(c));
      return !closed;
    }
    c.done = true;
    calls.push_back(std::move(c));
    size_t e = skip_ws(body, v.end);
    if (starts_at(body, e, "```")) e = skip_ws(body, e + 3);  // DeepSeek V3's fence
    if (starts_at(body, e, mk.end)) {
      p = e + mk.end.size();
      continue;
    }
    return !closed || e >= body.size();  // a missing END before the block's end is tolerated
  }
}

bool plain_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (is_ws(c) || c == '<' || c == '>' || c == '"') return false;
  return true;
}

// DeepSeek V3/R1: "function" SEP NAME\n```json\n{..}\n```; V3.1: NAME SEP {..}.
bool deepseek_head(std::string_view body, std::string_view head, size_t q, bool closed, PartialCall& c, size_t* at) {
  if (head != "function") {
    if (!plain_name(head)) return false;
    c.name = std::string(head);
    c.name_known = true;
    *at = q;
    return true;
  }
  const size_t nl = body.find('\n', q);
  if (nl == npos) return !closed;
  const std::string_view name = trim(body.substr(q, nl - q));
  if (!plain_name(name)) return false;
  c.name = std::string(name);
  c.name_known = true;
  size_t r = skip_ws(body, nl);
  if (starts_at(body, r, "```json")) {
    *at = r + 7;
  } else if (r < body.size() && body[r] == '{') {
    *at = r;
  } else if (!(r >= body.size() || partial_at(body, r, "```json"))) {
    return false;
  }
  return true;
}

// Kimi-K2: functions.NAME:INDEX SEP {..}; the head is the call's id.
bool kimi_head(std::string_view, std::string_view head, size_t q, bool, PartialCall& c, size_t* at) {
  std::string_view name = head;
  if (const size_t dot = name.find('.'); dot != npos) name = name.substr(dot + 1);
  if (const size_t colon = name.rfind(':'); colon != npos) name = name.substr(0, colon);
  if (!plain_name(name)) return false;
  c.id = std::string(head);
  c.name = std::string(name);
  c.name_known = true;
  *at = q;
  return true;
}

constexpr CallMarkers kDeepSeek{"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"};
constexpr CallMarkers kKimi{"<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"};

bool read_deepseek(std::string_view body, bool closed, const Context&, std::vector<PartialCall>& calls) {
  return read_marked_calls(body, closed, kDeepSeek, deepseek_head, calls);
}
bool read_kimi(std::string_view body, bool closed, const Context&, std::vector<PartialCall>& calls) {
  return read_marked_calls(body, closed, kKimi, kimi_head, calls);
}

}  // namespace

void parse_deepseek(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", read_deepseek);
}

void parse_kimi_k2(std::string_view t, bool final, const Context& ctx, SnapshotBuilder& out) {
  parse_blocks(t, final, ctx, out, "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", read_kimi);
}

void parse_harmony(std::string_view t, bool final, const Context&, SnapshotBuilder& out) {
  // gpt-oss: messages HEADER<|message|>BODY<|end|> (or <|call|>, <|return|>), later ones after
  // <|start|>assistant. A header naming "to=functions.NAME" is a call; the final and commentary
  // channels are content; the analysis channel is reasoning and not part of the content.
  static constexpr std::string_view kMessage = "<|message|>", kTo = "to=functions.";
  static constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
  if (t.find(kMessage) == npos) {
    // Before the first <|message|> is a header; a model that never writes one wrote plain text.
    if (final) out.content(t);
    return;
  }
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t mm = find_from(t, kMessage, pos);
    if (mm == npos) return;  // a header being written
    const std::string_view header = t.substr(pos, mm - pos);
    const size_t b = mm + kMessage.size();
    size_t end = npos, end_len = 0;
    for (std::string_view e : kEnds)
      if (size_t f = find_from(t, e, b); f < end) {
        end = f;
        end_len = e.size();
      }
    const bool closed = end != npos;
    if (const size_t to = header.find(kTo); to != npos) {
      size_t ne = to + kTo.size();
      while (ne < header.size() && !is_ws(header[ne]) && header[ne] != '<') ++ne;
      PartialCall c;
      c.name = std::string(header.substr(to + kTo.size(), ne - to - kTo.size()));
      c.name_known = !c.name.empty();
      const std::string_view body = t.substr(b, closed ? end - b : npos);
      JsonScan v = read_arguments(body, 0, c);
      c.done = c.name_known && v.status == Scan::Complete && body[v.begin] == '{';
      if (closed || final) {
        if (c.done) out.call(std::move(c));
        else out.content(body);
      } else if (v.status != Scan::Invalid) {
        out.call(std::move(c));
      }
    } else {
      const size_t ch = header.find("<|channel|>");
      const std::string_view channel = ch == npos ? std::string_view() : trim(header.substr(ch + 11));
      if (channel.substr(0, 8) != "analysis") {
        const size_t e = closed ? end : held_end(t, b, final, {kEnds[0], kEnds[1], kEnds[2], kEnds[3]});
        out.content(t.substr(b, e - b));
      }
    }
    if (!closed) return;
    pos = end + end_len;
  }
}

}  // namespace tmill::toolparse
