// The jinja module's public interface: our own Jinja interpreter, compatible with how Hugging Face renders
// tokenizer_config.json's chat_template: Jinja2 sandbox semantics (ImmutableSandboxedEnvironment),
// trim_blocks + lstrip_blocks on, loop controls, tojson with ensure_ascii=False, raise_exception(msg),
// strftime_now(fmt) and the {% generation %} tag. Everything else in src/jinja/ is internal.
//
//   auto prog = jinja::parse(source);                     // syntax errors carry the template line
//   auto text = jinja::render(**prog, context, opts);     // context: a JSON object of template variables
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

namespace tmill::jinja {

// A parsed template. Immutable: one Program may be rendered by several threads at once.
struct Program;

struct RenderOptions {
  // strftime_now()'s clock. Unset: the current local time. Set: that instant, formatted in UTC, so
  // parse_iso_time("2026-01-15T09:30:00") renders as written.
  std::optional<std::chrono::system_clock::time_point> now;
  uint64_t max_output_bytes = 64ull << 20;  // rendered text
  uint64_t max_alloc_bytes = 1ull << 30;    // total bytes of strings/containers created while rendering
  uint64_t max_steps = 20'000'000;          // loop iterations + macro calls + elements scanned
  int max_depth = 500;                      // nested evaluation (expressions, blocks, recursive macros)
};

// Parses a template. Errors: "TemplateSyntaxError: <what> (template line N)"; source that is not valid
// UTF-8 is rejected the same way (without a line): the interpreter works on valid UTF-8 only. An unknown
// filter or test is "TemplateAssertionError: No filter named 'x'." here, except inside an if/elif/else or
// an inline if-expression, where (as in Jinja2) it fails only if it runs: "TemplateRuntimeError: No filter
// named 'x' found." from render().
Result<std::shared_ptr<const Program>> parse(std::string_view source);

// Renders with every top-level key of `context` (a JSON object) as a template variable. Errors have the
// form "<PythonExceptionType>: <message> (template line N)", e.g. "TemplateError: <raise_exception msg>".
Result<std::string> render(const Program& program, const nlohmann::ordered_json& context,
                           const RenderOptions& opts = {});

// "2026-01-15T09:30:00", "2026-01-15 09:30", "2026-01-15", with optional ".ffffff" and "Z"/"+01:00".
// Times without an offset are taken as UTC. For RenderOptions::now.
Result<std::chrono::system_clock::time_point> parse_iso_time(std::string_view iso);

}  // namespace tmill::jinja
