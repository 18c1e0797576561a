// /v1/chat/completions prompt construction: the OpenAI fields that drive rendering (messages,
// add_generation_prompt, continue_final_message, tools, chat_template,
// chat_template_kwargs, reasoning_effort) checked and handed to the chat module (chat/messages.h), its errors turned
// into 400s naming the field.
#include <fmt/format.h>

#include "chat/messages.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server::detail {

namespace {

// The template's extra variables, as vLLM passes them: every key of chat_template_kwargs, plus
// reasoning_effort (which wins over a kwarg of that name) and, unless the kwargs set it, enable_thinking =
// (reasoning_effort != "none"). The conversation itself comes from the request's own fields.
json template_kwargs(const json& body) {
  json kwargs = json::object();
  if (const json* k = field(body, "chat_template_kwargs")) {
    if (!k->is_object()) throw_bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const char* own : {"messages", "tools"})
      if (k->contains(own))
        throw_bad_request(fmt::format("'chat_template_kwargs' must not set '{}'; use the request's own field", own),
                          "chat_template_kwargs");
    kwargs = *k;
  }
  if (auto effort = opt_string(body, "reasoning_effort")) {
    static constexpr const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    bool known = false;
    for (const char* e : kEfforts) known |= *effort == e;
    if (!known)
      throw_bad_request("'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max",
                        "reasoning_effort");
    kwargs["reasoning_effort"] = *effort;
    if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = *effort != "none";
  }
  return kwargs;
}

}  // namespace

std::string render_messages(const json& body, const ServerContext& ctx, const json* replacement) {
  const json* msgs = replacement ? replacement : field(body, "messages");
  if (!msgs) throw_bad_request("'messages' is required", "messages");
  auto messages = normalize_chat_messages(*msgs);
  if (!messages.ok()) throw_bad_request(messages.error(), "messages");
  ChatRenderOptions opts;
  opts.add_generation_prompt = opt_bool(body, "add_generation_prompt").value_or(true);
  opts.continue_final_message = opt_bool(body, "continue_final_message").value_or(false);
  if (opts.continue_final_message && opts.add_generation_prompt && field(body, "add_generation_prompt"))
    throw_bad_request("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                      "continue_final_message");
  opts.tools = field(body, "tools");
  if (opts.tools && !opts.tools->is_array()) throw_bad_request("'tools' must be an array", "tools");
  const json kwargs = template_kwargs(body);
  opts.template_kwargs = &kwargs;

  std::shared_ptr<const ChatTemplate> tmpl = ctx.chat_template;
  if (auto src = opt_string(body, "chat_template")) {
    auto parsed = ChatTemplate::parse(*src);
    if (!parsed.ok()) throw_bad_request("chat_template: " + parsed.error(), "chat_template");
    tmpl = std::make_shared<const ChatTemplate>(std::move(parsed).value());
  }
  if (!tmpl) throw_bad_request("This server has no chat template; use /v1/completions", "messages");
  std::string text;
  ChatRenderError err;
  if (!render_chat(*tmpl, *messages, opts, *ctx.tokenizer, &text, &err)) {
    if (err.kind == ChatRenderError::Kind::ContinueFinal) throw_bad_request(err.message, "continue_final_message");
    throw_bad_request("Chat template error: " + err.message, "messages");
  }
  return text;
}

}  // namespace tmill::server::detail
