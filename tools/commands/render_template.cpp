// tokenmill render-template --template FILE.jinja --context FILE.json [--now ISO_TIME]
// Renders a chat template the way Hugging Face's apply_chat_template does and prints the text exactly
// (no newline added). Every top-level key of the context JSON becomes a template variable.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli_common.h"
#include "core/mmap.h"

namespace {

struct RenderTemplateArgs {
  std::string template_path;
  std::string context_path;
  std::string now;
};

int run_render_template(const RenderTemplateArgs& a) {
  auto source = tmill::read_file(a.template_path);
  if (!source) {
    std::fprintf(stderr, "error: %s\n", source.error().c_str());
    return 1;
  }
  auto ctx_text = tmill::read_file(a.context_path);
  if (!ctx_text) {
    std::fprintf(stderr, "error: %s\n", ctx_text.error().c_str());
    return 1;
  }
  nlohmann::ordered_json ctx;
  try {
    ctx = nlohmann::ordered_json::parse(*ctx_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s: invalid JSON: %s\n", a.context_path.c_str(), e.what());
    return 1;
  }
  if (!ctx.is_object()) {
    std::fprintf(stderr, "error: %s: the context must be a JSON object\n", a.context_path.c_str());
    return 1;
  }
  tmill::RenderOptions opts;
  if (!a.now.empty()) {
    auto t = tmill::parse_iso_time(a.now);
    if (!t) {
      std::fprintf(stderr, "error: --now: %s\n", t.error().c_str());
      return 1;
    }
    opts.now = *t;
  }
  auto tmpl = tmill::ChatTemplate::parse(std::move(*source));
  if (!tmpl) {
    std::fprintf(stderr, "%s\n", tmpl.error().c_str());
    return 1;
  }
  auto text = tmpl->render(ctx, opts);
  if (!text) {
    std::fprintf(stderr, "%s\n", text.error().c_str());
    return 1;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fflush(stdout);
  return 0;
}

TM_COMMAND("render-template", "render a chat template (Jinja) with a JSON context, like HF apply_chat_template",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto a = std::make_shared<RenderTemplateArgs>();
             app.add_option("--template", a->template_path, "chat template file (Jinja)")->required();
             app.add_option("--context", a->context_path,
                            "JSON object: messages, add_generation_prompt, bos_token, eos_token, tools, ...")
                 ->required();
             app.add_option("--now", a->now, "fixed time for strftime_now(), ISO 8601 (e.g. 2026-01-15T09:30:00)");
             return [a] { return run_render_template(*a); };
           });

}  // namespace
