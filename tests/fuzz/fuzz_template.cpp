// fuzz-deps: jinja
// libFuzzer target for the chat-template (Jinja) parser and interpreter, through jinja/jinja.h. Input bytes
// = template source. Renders against a small fixed chat context with tight limits; every outcome must be text
// or a clean error (no crash, sanitizer report, hang or unbounded memory). Invalid UTF-8 is rejected by
// parse(); the input is then also tried with invalid bytes replaced so the fuzzer explores past that check.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "jinja/jinja.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Hi \u4f60\u597d"},
      {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
      {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3, "f": 0.5, "none": null
  })");
  return ctx;
}

void render(const std::string& src) {
  auto prog = tmill::jinja::parse(src);
  if (!prog) return;
  tmill::jinja::RenderOptions opts;
  opts.now = std::chrono::system_clock::time_point(std::chrono::seconds(1768469400));
  opts.max_output_bytes = 1 << 20;
  opts.max_alloc_bytes = 32 << 20;
  opts.max_steps = 100'000;
  opts.max_depth = 200;
  auto out = tmill::jinja::render(**prog, context(), opts);
  (void)out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string src(reinterpret_cast<const char*>(data), size);
  render(src);
  if (!tmill::is_valid_utf8(src)) {
    for (char& c : src)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    render(src);
  }
  return 0;
}
