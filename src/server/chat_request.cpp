// /v1/chat/completions prompt construction: validating `messages`, rendering the chat template and
// tokenizing the result without doubling BOS.
#include <fmt/format.h>

#include "chat/chat_template.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server::detail {

namespace {

// Content as the template sees it: a string. Text parts are joined with "\n" (as vLLM does for
// templates that expect string content); other part types are not supported by a text-only model.
json message_content(const json& content, size_t i) {
  if (content.is_string()) return content;
  if (!content.is_array())
    throw_bad_request(fmt::format("messages[{}].content must be a string or an array of content parts", i), "messages");
  std::string text;
  bool first = true;
  for (const json& part : content) {
    if (!part.is_object())
      throw_bad_request(fmt::format("messages[{}].content parts must be objects", i), "messages");
    auto type = opt_string(part, "type");
    if (!type) throw_bad_request(fmt::format("messages[{}].content parts need a 'type'", i), "messages");
    if (*type != "text")
      throw_bad_request(fmt::format("messages[{}]: content part type '{}' is not supported (text only)", i, *type),
                        "messages");
    auto t = opt_string(part, "text");
    if (!t) throw_bad_request(fmt::format("messages[{}]: a text content part needs a string 'text'", i), "messages");
    if (!first) text += "\n";
    text += *t;
    first = false;
  }
  return text;
}

json checked_messages(const json& body) {
  const json* msgs = field(body, "messages");
  if (!msgs) throw_bad_request("'messages' is required", "messages");
  if (!msgs->is_array()) throw_bad_request("'messages' must be an array", "messages");
  if (msgs->empty()) throw_bad_request("'messages' must not be empty", "messages");
  json out = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    if (!m.is_object()) throw_bad_request(fmt::format("messages[{}] must be an object", i), "messages");
    const json* role = field(m, "role");
    if (!role || !role->is_string() || role->get_ref<const std::string&>().empty())
      throw_bad_request(fmt::format("messages[{}].role must be a non-empty string", i), "messages");
    json copy = m;
    const json* content = field(m, "content");
    if (content) {
      copy["content"] = message_content(*content, i);
    } else if (*role != "assistant") {
      throw_bad_request(fmt::format("messages[{}].content is required for role '{}'", i, role->get<std::string>()),
                        "messages");
    }
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

std::string render_messages(const json& body, const ServerContext& ctx) {
  json messages = checked_messages(body);
  const bool add_generation_prompt = opt_bool(body, "add_generation_prompt").value_or(true);
  const bool continue_final = opt_bool(body, "continue_final_message").value_or(false);
  if (continue_final && add_generation_prompt && field(body, "add_generation_prompt"))
    throw_bad_request("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                      "continue_final_message");
  const json* tools = field(body, "tools");
  if (tools && !tools->is_array()) throw_bad_request("'tools' must be an array", "tools");
  if (const json* choice = field(body, "tool_choice")) {
    if (!(choice->is_string() && (*choice == "none" || *choice == "auto")))
      throw_bad_request("only tool_choice 'none' and 'auto' are supported (no tool-call parsing)", "tool_choice");
  }
  const json* kwargs = field(body, "chat_template_kwargs");
  if (kwargs && !kwargs->is_object()) throw_bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");

  std::shared_ptr<const ChatTemplate> tmpl = ctx.chat_template;
  if (auto src = opt_string(body, "chat_template")) {
    auto parsed = ChatTemplate::parse(*src);
    if (!parsed.ok()) throw_bad_request("chat_template: " + parsed.error(), "chat_template");
    tmpl = std::make_shared<const ChatTemplate>(std::move(parsed).value());
  }
  if (!tmpl) throw_bad_request("This server has no chat template; use /v1/completions", "messages");
  const Tokenizer& tok = *ctx.tokenizer;
  const bool gen_prompt = add_generation_prompt && !continue_final;
  auto text = apply_chat_template(*tmpl, messages, gen_prompt, tok.bos_id() >= 0 ? tok.bos_text() : "",
                                  tok.eos_id() >= 0 ? tok.eos_text() : "", tools, kwargs);
  if (!text.ok()) throw_bad_request("Chat template error: " + text.error(), "messages");
  std::string out = std::move(text).value();
  if (continue_final) {
    // Continue the last message: cut the rendered text right after its content (as Hugging Face does).
    const json& last = messages.back();
    const json* c = field(last, "content");
    const std::string content = c && c->is_string() ? c->get<std::string>() : std::string();
    const size_t at = content.empty() ? std::string::npos : out.rfind(content);
    if (at == std::string::npos)
      throw_bad_request("continue_final_message: the final message's content is not in the rendered prompt",
                        "continue_final_message");
    out.resize(at + content.size());
  }
  return out;
}

std::vector<int32_t> tokenize_chat(const std::string& text, const Tokenizer& tok, bool add_special_tokens) {
  if (add_special_tokens) return tok.encode(text, true, true);
  // Templates usually write BOS themselves ("{{ bos_token }}..."): add it only when the vocabulary
  // wants one and the rendered text does not already start with it.
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id()))
    ids.insert(ids.begin(), tok.bos_id());
  return ids;
}

}  // namespace tmill::server::detail
