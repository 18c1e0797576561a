// fuzz-deps: chat core jinja tokenizer formats
// libFuzzer target: model output -> the tool-call parsers (chat/tool_calls.h). The first byte picks the
// format and the chunk sizes; the rest is the text, parsed whole and streamed in pieces. Checks: nothing
// crashes; every call has a name and (for UTF-8 text) a JSON object as arguments; streamed calls start
// in order and each delta belongs to a started call.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

using namespace tmill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const ToolCallFormat kFormats[] = {
      ToolCallFormat::Hermes,     ToolCallFormat::Qwen3Coder,  ToolCallFormat::Llama3Json, ToolCallFormat::Mistral,
      ToolCallFormat::DeepSeekV3, ToolCallFormat::DeepSeekV31, ToolCallFormat::Glm45,      ToolCallFormat::KimiK2,
      ToolCallFormat::Granite,    ToolCallFormat::CommandR,    ToolCallFormat::Functionary, ToolCallFormat::FireFunction,
      ToolCallFormat::MinimaxM2,  ToolCallFormat::OpenAI};
  const ToolCallFormat f = kFormats[data[0] % (sizeof(kFormats) / sizeof(kFormats[0]))];
  const size_t step = 1 + (data[0] >> 4);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"},"n":{"type":"integer"}}}}}])");

  // Arguments are the model's text: JSON when the text is valid UTF-8 (the detokenizer's is; the
  // server replaces invalid bytes when it writes the response).
  bool utf8 = true;
  try {
    (void)nlohmann::ordered_json(std::string(text)).dump();
  } catch (const nlohmann::json::exception&) {
    utf8 = false;
  }
  ToolCallParse p = parse_tool_calls(f, text, &tools);
  for (const ToolCall& c : p.calls) {
    if (c.name.empty()) std::abort();
    if (utf8 && (!nlohmann::ordered_json::accept(c.arguments) || !nlohmann::ordered_json::parse(c.arguments).is_object()))
      std::abort();
  }

  ToolCallStream s(f, &tools);
  int32_t started = 0;
  auto check = [&](const ToolStreamDelta& d) {
    for (const ToolCallDelta& c : d.calls) {
      if (c.first) {
        if (c.index != started || c.name.empty()) std::abort();
        ++started;
      } else if (c.index >= started) {
        std::abort();
      }
    }
  };
  for (size_t i = 0; i < text.size(); i += step) check(s.feed(text.substr(i, step)));
  check(s.finish());
  if (s.calls_started() != started) std::abort();
  return 0;
}
