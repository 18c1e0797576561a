// Tool-call formats by name and by template, the finished-text parse, and the streaming diff.
#include "chat/tool_calls.h"

#include "chat/tool_parse.h"

namespace tmill {

namespace {

using namespace toolparse;

struct FormatInfo {
  ToolCallFormat format;
  std::string_view name;
  ParseFn parse;
  bool special_markers;
};

constexpr FormatInfo kFormats[] = {
    {ToolCallFormat::Hermes, "hermes", parse_hermes, true},
    {ToolCallFormat::Qwen3Coder, "qwen3_coder", parse_qwen3_coder, true},
    {ToolCallFormat::Llama3Json, "llama3_json", parse_llama3_json, true},
    {ToolCallFormat::Mistral, "mistral", parse_mistral, true},
    {ToolCallFormat::DeepSeekV3, "deepseek_v3", parse_deepseek, true},
    {ToolCallFormat::DeepSeekV31, "deepseek_v31", parse_deepseek, true},
    {ToolCallFormat::Glm45, "glm45", parse_glm45, true},
    {ToolCallFormat::KimiK2, "kimi_k2", parse_kimi_k2, true},
    {ToolCallFormat::Granite, "granite", parse_granite, true},
    {ToolCallFormat::CommandR, "command_r", parse_command_r, true},
    {ToolCallFormat::Functionary, "functionary", parse_functionary, false},
    {ToolCallFormat::FireFunction, "firefunction_v2", parse_firefunction, false},
    {ToolCallFormat::MinimaxM2, "minimax_m2", parse_minimax_m2, true},
    {ToolCallFormat::OpenAI, "openai", parse_harmony, true},
    {ToolCallFormat::Gemma4, "gemma4", parse_gemma4, true},
};

const FormatInfo& info(ToolCallFormat f) {
  for (const FormatInfo& i : kFormats)
    if (i.format == f) return i;
  return kFormats[0];
}

Snapshot snapshot(ToolCallFormat f, std::string_view text, bool final, const nlohmann::ordered_json* tools) {
  SnapshotBuilder b;
  Context ctx{tools && tools->is_array() ? tools : nullptr};
  info(f).parse(text, final, ctx, b);
  return b.build(final);
}

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat f) { return info(f).name; }

std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  for (const FormatInfo& i : kFormats)
    if (i.name == name) return i.format;
  if (name == "qwen" || name == "qwen25" || name == "qwen3") return ToolCallFormat::Hermes;
  if (name == "glm4_moe" || name == "glm46") return ToolCallFormat::Glm45;
  if (name == "harmony" || name == "gpt_oss") return ToolCallFormat::OpenAI;
  return std::nullopt;
}

std::string tool_call_format_names() {
  std::string s;
  for (const FormatInfo& i : kFormats) {
    if (!s.empty()) s += ", ";
    s += i.name;
  }
  return s;
}

bool tool_call_markers_are_special(ToolCallFormat f) { return info(f).special_markers; }

ToolCallFormat detect_tool_call_format(std::string_view t) {
  // Most specific first: several formats share <tool_call>.
  if (contains(t, "<|channel|>") && contains(t, "<|start|>")) return ToolCallFormat::OpenAI;
  if (contains(t, "<|tool_call>call:")) return ToolCallFormat::Gemma4;
  if (contains(t, "<minimax:tool_call>")) return ToolCallFormat::MinimaxM2;
  if (contains(t, "<function=") && contains(t, "<parameter=")) return ToolCallFormat::Qwen3Coder;
  if (contains(t, "<arg_key>")) return ToolCallFormat::Glm45;
  if (contains(t, "<|tool_calls_section_begin|>")) return ToolCallFormat::KimiK2;
  if (contains(t, "tool▁calls▁begin"))
    return contains(t, "```json") ? ToolCallFormat::DeepSeekV3 : ToolCallFormat::DeepSeekV31;
  if (contains(t, "[TOOL_CALLS]")) return ToolCallFormat::Mistral;
  if (contains(t, "<|START_ACTION|>") || (contains(t, "Action:") && contains(t, "tool_name")))
    return ToolCallFormat::CommandR;
  if (contains(t, ">>>") && contains(t, "recipient")) return ToolCallFormat::Functionary;
  if (contains(t, "functools[")) return ToolCallFormat::FireFunction;
  if (contains(t, "<|tool_call|>")) return ToolCallFormat::Granite;
  if (contains(t, "<tool_call>")) return ToolCallFormat::Hermes;
  if (contains(t, "<|python_tag|>") || contains(t, "{\"name\": \"")) return ToolCallFormat::Llama3Json;
  return ToolCallFormat::Hermes;
}

ToolCallParse parse_tool_calls(ToolCallFormat f, std::string_view text, const nlohmann::ordered_json* tools) {
  Snapshot s = snapshot(f, text, /*final=*/true, tools);
  ToolCallParse p;
  p.content = std::move(s.content);
  for (PartialCall& c : s.calls)
    if (c.done) p.calls.push_back({std::move(c.id), std::move(c.name), std::move(c.arguments)});
  return p;
}

ToolCallStream::ToolCallStream(ToolCallFormat f, const nlohmann::ordered_json* tools) : format_(f) {
  if (tools && tools->is_array()) tools_ = *tools;
}

ToolStreamDelta ToolCallStream::feed(std::string_view text) {
  text_ += text;
  return diff(false);
}

ToolStreamDelta ToolCallStream::finish() { return diff(true); }

ToolStreamDelta ToolCallStream::diff(bool final) {
  Snapshot s = snapshot(format_, text_, final, tools_.is_array() ? &tools_ : nullptr);
  ToolStreamDelta d;
  // Content only grows; a snapshot that disagrees with what was sent (a call that turned out malformed
  // after it was streamed) adds nothing rather than repeating text.
  if (s.content.size() > content_sent_.size() && s.content.compare(0, content_sent_.size(), content_sent_) == 0) {
    d.content = s.content.substr(content_sent_.size());
    content_sent_ = s.content;
  }
  for (size_t i = 0; i < s.calls.size(); ++i) {
    PartialCall& c = s.calls[i];
    if (final && !c.done) break;
    if (i < args_sent_.size()) {
      std::string& sent = args_sent_[i];
      if (c.arguments.size() > sent.size() && c.arguments.compare(0, sent.size(), sent) == 0) {
        d.calls.push_back({static_cast<int32_t>(i), false, {}, {}, c.arguments.substr(sent.size())});
        sent = c.arguments;
      }
      continue;
    }
    if (!c.name_known) break;  // calls start in order, once their name is known
    d.calls.push_back({static_cast<int32_t>(i), true, c.id, c.name, c.arguments});
    args_sent_.push_back(c.arguments);
  }
  return d;
}

}  // namespace tmill
