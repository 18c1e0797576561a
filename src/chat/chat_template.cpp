// ChatTemplate over jinja::parse/render, apply_chat_template's context, and the ChatML fallback.
#include "chat/chat_template.h"

#include <utility>

#include "core/log.h"

namespace tmill {

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  auto prog = jinja::parse(source);
  if (!prog) return prog.error_value();
  ChatTemplate t;
  t.program_ = std::move(*prog);
  t.source_ = std::make_shared<const std::string>(std::move(source));
  return t;
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context, const RenderOptions& opts) const {
  if (!program_) return Error{"chat template is empty (not parsed)"};
  return jinja::render(*program_, context, opts);
}

Result<std::string> apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt, const std::string& bos_token,
                                        const std::string& eos_token, const nlohmann::ordered_json* tools,
                                        const nlohmann::ordered_json* extra_context, const RenderOptions& opts) {
  // As Hugging Face merges them: extra keys override the special tokens (bos_token, ...), while the
  // conversation itself (messages, tools, add_generation_prompt) is what the caller passed.
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  if (tools && !tools->is_null()) ctx["tools"] = *tools;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (extra_context) {
    if (!extra_context->is_object()) return Error{"extra chat template context must be a JSON object"};
    for (auto it = extra_context->begin(); it != extra_context->end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "add_generation_prompt") continue;
      ctx[k] = it.value();
    }
  }
  return tmpl.render(ctx, opts);
}

const char* fallback_chat_template() {
  return "{%- for message in messages -%}\n"
         "{{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
         "{%- if message['content'] is string -%}\n"
         "{{- message['content'] -}}\n"
         "{%- elif message['content'] is iterable -%}\n"
         "{%- for part in message['content'] if part['type'] == 'text' -%}{{- part['text'] -}}{%- endfor -%}\n"
         "{%- endif -%}\n"
         "{{- '<|im_end|>\\n' -}}\n"
         "{%- endfor -%}\n"
         "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";
}

Result<ChatTemplate> chat_template_for_model(const std::string& model_template, std::string_view model_name) {
  if (model_template.empty()) {
    log_warn("model '{}' has no chat template; using the built-in ChatML fallback", model_name);
    return ChatTemplate::parse(fallback_chat_template());
  }
  return ChatTemplate::parse(model_template);
}

}  // namespace tmill
