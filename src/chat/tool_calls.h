// Tool calls in a model's generated text: one parser per tool-call format of the chat templates we know
// (Hermes/Qwen `<tool_call>{json}</tool_call>`, Qwen3-Coder XML, Llama 3.x JSON, Mistral `[TOOL_CALLS]`,
// DeepSeek, GLM-4.x, Kimi-K2, Granite, Command R, functionary v3.2, FireFunction v2, MiniMax-M2,
// gpt-oss harmony and Gemma 4), each returning the text that is not a call (content) and the calls (name, arguments
// as a JSON string, id when the format carries one).
//
//   auto fmt = detect_tool_call_format(template_source);      // or tool_call_format_from_name("hermes")
//   ToolCallParse p = parse_tool_calls(*fmt, text, &tools);    // a finished output
//
//   ToolCallStream s(fmt, &tools);                             // streaming: feed detokenized pieces
//   ToolStreamDelta d = s.feed(piece);  ...  d = s.finish();   // content and tool-call deltas
//
// A call the parser cannot read (not JSON, no name, cut off) stays in the content, as the model wrote it.
// Streaming holds back text that may be the start of a call marker and emits a call's name as soon as
// it is known, then its arguments piece by piece; feeding the same text in any chunking yields the
// same deltas in total, and they add up to what parse_tool_calls returns for well-formed calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tmill {

enum class ToolCallFormat : uint8_t {
  Hermes,        // hermes: <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call> (Qwen2.5, Qwen3, QwQ, Hermes, ChatML)
  Qwen3Coder,    // qwen3_coder: <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
  Llama3Json,    // llama3_json: {"name": .., "parameters": {..}} (optionally after <|python_tag|>, ';'-separated)
  Mistral,       // mistral: [TOOL_CALLS][{"name","arguments","id"}] or [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{..}
  DeepSeekV3,    // deepseek_v3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```...
  DeepSeekV31,   // deepseek_v31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>...
  Glm45,         // glm45: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
  KimiK2,        // kimi_k2: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{..}...
  Granite,       // granite: <|tool_call|>[{"name": .., "arguments": {..}}]
  CommandR,      // command_r: <|START_ACTION|>[{"tool_call_id","tool_name","parameters"}]<|END_ACTION|> or Action: ```json [..]```
  Functionary,   // functionary: (the prompt ends with ">>>") NAME\n{..} segments joined by ">>>"; "all\n" is content
  FireFunction,  // firefunction_v2: functools[{"name": .., "arguments": {..}}]
  MinimaxM2,     // minimax_m2: <minimax:tool_call>\n<invoke name="NAME">\n<parameter name="K">V</parameter>...
  OpenAI,        // openai: gpt-oss harmony, <|channel|>commentary to=functions.NAME ...<|message|>{..}<|call|>
  Gemma4,        // gemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|> (Gemma 4's own value syntax)
};

// The --tool-call-parser names (vLLM's where vLLM has the format): "hermes", "qwen3_coder", ...
std::string_view tool_call_format_name(ToolCallFormat f);
std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name);
std::string tool_call_format_names();  // "hermes, qwen3_coder, ..." for help texts and errors

// The format a chat template renders tool calls in, read from the template text. A template that shows
// no known format (or none at all: the ChatML fallback) gets Hermes.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// True when the format's markers are (in some models that use it) special tokens, so they must be kept
// in the detokenized text (skip_special_tokens false) for the parser to see them; as vLLM does. Only
// functionary's ">>>" and FireFunction's "functools" are always plain text.
bool tool_call_markers_are_special(ToolCallFormat f);

struct ToolCall {
  std::string id;         // from the text when the format carries one (Kimi, Mistral), else empty
  std::string name;
  std::string arguments;  // a JSON object as text
};

struct ToolCallParse {
  std::string content;    // the text that is not a call (whitespace next to calls trimmed)
  std::vector<ToolCall> calls;
};

// `tools`: the request's OpenAI `tools` array (or null); formats that write arguments as text (XML) use
// each function's `parameters` to type the values.
ToolCallParse parse_tool_calls(ToolCallFormat f, std::string_view text, const nlohmann::ordered_json* tools = nullptr);

// One call's piece of a streaming delta: the first piece of a call has `first` set with its id (may be
// empty: the caller assigns one) and name; arguments is the next piece of the JSON text (may be empty).
struct ToolCallDelta {
  int32_t index = 0;
  bool first = false;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat f, const nlohmann::ordered_json* tools = nullptr);
  ToolStreamDelta feed(std::string_view text);
  ToolStreamDelta finish();  // the output is complete: release what was held back
  int32_t calls_started() const { return static_cast<int32_t>(args_sent_.size()); }

 private:
  ToolStreamDelta diff(bool final);

  ToolCallFormat format_;
  nlohmann::ordered_json tools_;  // a copy: the stream may outlive the request body
  std::string text_;              // everything fed so far (each feed re-parses it: outputs are short)
  std::string content_sent_;
  std::vector<std::string> args_sent_;  // per started call
};

}  // namespace tmill
