#include "chat/messages.h"

#include <fmt/format.h>

#include "tokenizer/tokenizer.h"

namespace tmill {

namespace {

using json = nlohmann::ordered_json;

const json* present(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Result<json> message_content(const json& content, size_t i) {
  if (content.is_string()) return content;
  if (!content.is_array())
    return Error{fmt::format("messages[{}].content must be a string or an array of content parts", i)};
  std::string text;
  bool first = true;
  for (const json& part : content) {
    if (!part.is_object()) return Error{fmt::format("messages[{}].content parts must be objects", i)};
    const json* type = present(part, "type");
    if (!type || !type->is_string()) return Error{fmt::format("messages[{}].content parts need a 'type'", i)};
    if (*type != "text")
      return Error{fmt::format("messages[{}]: content part type '{}' is not supported (text only)", i,
                               type->get<std::string>())};
    const json* t = present(part, "text");
    if (!t || !t->is_string()) return Error{fmt::format("messages[{}]: a text content part needs a string 'text'", i)};
    if (!first) text += "\n";
    text += t->get<std::string>();
    first = false;
  }
  return json(text);
}

bool falsy(const json& v) {  // Python's truthiness, for vLLM's `if arguments:`
  return v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         ((v.is_object() || v.is_array()) && v.empty()) || (v.is_boolean() && !v.get<bool>()) ||
         (v.is_number() && v.get<double>() == 0);
}

// What vLLM does to assistant messages before rendering: tool-call arguments given as a JSON string (the
// OpenAI API's form) become objects, which is what tool-use templates iterate over; missing or empty
// arguments become {}; an empty tool_calls list is dropped; `reasoning` and `reasoning_content` are the
// same field (templates read reasoning_content). gpt-oss's harmony template reads the reasoning from
// `thinking` (its analysis channel): it gets a copy unless the message has its own, as llama.cpp's
// gpt-oss chat handler gives it.
Status assistant_fields(const json& m, size_t i, json& copy) {
  if (const json* calls = present(m, "tool_calls")) {
    if (!calls->is_array()) return Error{fmt::format("messages[{}].tool_calls must be an array", i)};
    if (calls->empty()) copy.erase("tool_calls");
    for (size_t j = 0; j < calls->size(); ++j) {
      const json& call = (*calls)[j];
      const json* fn = call.is_object() ? present(call, "function") : nullptr;
      if (!fn || !fn->is_object())
        return Error{fmt::format("messages[{}].tool_calls[{}] needs a 'function' object", i, j)};
      json& args = copy["tool_calls"][j]["function"]["arguments"];
      const json* given = present(*fn, "arguments");
      if (!given || falsy(*given)) {
        args = json::object();
      } else if (given->is_string()) {
        args = json::parse(given->get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
        if (args.is_discarded())
          return Error{fmt::format("messages[{}].tool_calls[{}].function.arguments is not valid JSON", i, j)};
      } else if (!given->is_object() && !given->is_array()) {
        return Error{fmt::format("messages[{}].tool_calls[{}].function.arguments must be a JSON string or object", i, j)};
      }
    }
  }
  const json* r = present(m, "reasoning");
  if (!r) r = present(m, "reasoning_content");
  if (r) {
    const json value = *r;
    copy["reasoning"] = value;
    copy["reasoning_content"] = value;
    if (!present(m, "thinking")) copy["thinking"] = value;
  }
  return {};
}

}  // namespace

Result<json> normalize_chat_messages(const json& msgs) {
  if (!msgs.is_array()) return Error{"'messages' must be an array"};
  if (msgs.empty()) return Error{"'messages' must not be empty"};
  json out = json::array();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    if (!m.is_object()) return Error{fmt::format("messages[{}] must be an object", i)};
    const json* role = present(m, "role");
    if (!role || !role->is_string() || role->get_ref<const std::string&>().empty())
      return Error{fmt::format("messages[{}].role must be a non-empty string", i)};
    json copy = m;
    if (const json* content = present(m, "content")) {
      TM_ASSIGN_OR_RETURN(copy["content"], message_content(*content, i));
    } else if (*role != "assistant") {
      return Error{fmt::format("messages[{}].content is required for role '{}'", i, role->get<std::string>())};
    } else {
      copy["content"] = "";  // vLLM: an assistant turn without content (tool calls only) renders as ""
    }
    if (*role == "assistant") TM_TRY(assistant_fields(m, i, copy));
    out.push_back(std::move(copy));
  }
  return out;
}

bool render_chat(const ChatTemplate& tmpl, const json& messages, const ChatRenderOptions& opts, const Tokenizer& tok,
                 std::string* out, ChatRenderError* error) {
  const bool gen_prompt = opts.add_generation_prompt && !opts.continue_final_message;
  auto text = apply_chat_template(tmpl, messages, gen_prompt, tok.bos_id() >= 0 ? tok.bos_text() : "",
                                  tok.eos_id() >= 0 ? tok.eos_text() : "", opts.tools, opts.template_kwargs);
  if (!text.ok()) {
    *error = {ChatRenderError::Kind::Template, text.error()};
    return false;
  }
  *out = std::move(text).value();
  if (opts.continue_final_message) {
    // Continue the last message: cut the rendered text right after its content (as Hugging Face does).
    const json* c = messages.empty() ? nullptr : present(messages.back(), "content");
    const std::string content = c && c->is_string() ? c->get<std::string>() : std::string();
    const size_t at = content.empty() ? std::string::npos : out->rfind(content);
    if (at == std::string::npos) {
      *error = {ChatRenderError::Kind::ContinueFinal,
                "continue_final_message: the final message's content is not in the rendered prompt"};
      return false;
    }
    out->resize(at + content.size());
  }
  return true;
}

std::vector<int32_t> tokenize_chat_prompt(const std::string& text, const Tokenizer& tok, bool add_special_tokens) {
  if (add_special_tokens) return tok.encode(text, true, true);
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id()))
    ids.insert(ids.begin(), tok.bos_id());
  return ids;
}

}  // namespace tmill
