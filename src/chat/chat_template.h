// Chat templates: Hugging Face's apply_chat_template on top of the jinja module (jinja/jinja.h, our own
// interpreter with HF's Jinja2 sandbox semantics), and the ChatML fallback for models without a template.
//
//   auto tmpl = ChatTemplate::parse(source);              // syntax errors carry the template line
//   auto text = apply_chat_template(*tmpl, messages, /*add_generation_prompt=*/true, "<s>", "</s>");
//
// Rendering is bounded (output bytes, allocated bytes, steps, recursion depth; see RenderOptions), so a
// hostile template fails with a clear message instead of hanging or exhausting memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "jinja/jinja.h"

namespace tmill {

// Render limits and strftime_now()'s clock, and the parser for its --now form (jinja/jinja.h).
using jinja::RenderOptions;
using jinja::parse_iso_time;

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
// add_generation_prompt, bos_token, eos_token} plus every key of `extra_context` (e.g. enable_thinking,
// reasoning_effort), which may override bos_token/eos_token but not messages, tools or add_generation_prompt.
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
