// Chat templates: a Jinja interpreter (our own, see jinja_*.h) compatible with how Hugging Face renders
// tokenizer_config.json's chat_template: Jinja2 sandbox semantics, trim_blocks + lstrip_blocks on,
// loop controls, tojson with ensure_ascii=False, raise_exception(msg), strftime_now(fmt) and the
// {% generation %} tag.
//
//   auto tmpl = ChatTemplate::parse(source);              // syntax errors carry the template line
//   auto text = apply_chat_template(*tmpl, messages, /*add_generation_prompt=*/true, "<s>", "</s>");
//
// Rendering is bounded (output bytes, allocated bytes, steps, recursion depth; see RenderOptions), so a
// hostile template fails with a clear message instead of hanging or exhausting memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace tmill {

namespace jinja {
struct Program;
}

struct RenderOptions {
  // strftime_now()'s clock. Unset: the current local time. Set: that instant, formatted in UTC, so
  // parse_iso_time("2026-01-15T09:30:00") renders as written.
  std::optional<std::chrono::system_clock::time_point> now;
  uint64_t max_output_bytes = 64ull << 20;  // rendered text
  uint64_t max_alloc_bytes = 1ull << 30;    // total bytes of strings/containers created while rendering
  uint64_t max_steps = 20'000'000;          // loop iterations + macro calls + elements scanned
  int max_depth = 500;                      // nested evaluation depth (recursive macros)
};

// "2026-01-15T09:30:00", "2026-01-15 09:30", "2026-01-15", with optional ".ffffff" and "Z"/"+01:00".
// Times without an offset are taken as UTC.
Result<std::chrono::system_clock::time_point> parse_iso_time(std::string_view iso);

class ChatTemplate {
 public:
  // Parses the template. Errors: "TemplateSyntaxError: <what> (template line N)".
  static Result<ChatTemplate> parse(std::string source);

  // Renders with every top-level key of `context` (a JSON object) as a template variable. Errors have the
  // form "<PythonExceptionType>: <message> (template line N)", e.g. "TemplateError: <raise_exception msg>".
  // Thread-safe: a parsed template may be rendered concurrently.
  Result<std::string> render(const nlohmann::ordered_json& context, const RenderOptions& opts = {}) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Program> program_;
};

// Hugging Face's apply_chat_template(tokenize=False): context = {messages, tools (when given),
// add_generation_prompt, bos_token, eos_token} plus every key of `extra_context` (e.g. enable_thinking).
Result<std::string> apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt, const std::string& bos_token,
                                        const std::string& eos_token, const nlohmann::ordered_json* tools = nullptr,
                                        const nlohmann::ordered_json* extra_context = nullptr,
                                        const RenderOptions& opts = {});

// ChatML, for models that ship no template.
const char* fallback_chat_template();

// The model's template, or (when `model_template` is empty) the ChatML fallback with a warning in the log.
Result<ChatTemplate> chat_template_for_model(const std::string& model_template, std::string_view model_name);

}  // namespace tmill
