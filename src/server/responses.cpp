#include "server/responses.h"

#include <chrono>

#include <fmt/format.h>

#include "server/openai_response.h"
#include "server/request_fields.h"

namespace tmill::server {

namespace {

std::string str_field(const json& o, const char* key, const char* where, const char* param = "input") {
  if (!o.contains(key) || !o[key].is_string())
    throw_bad_request(fmt::format("{} needs a string '{}'", where, key), param);
  return o[key].get<std::string>();
}

// A message item's content -> chat content (a string, or text parts).
json message_content(const json& content) {
  if (content.is_string()) return content;
  if (!content.is_array()) throw_bad_request("a message's 'content' must be a string or a list of parts", "input");
  json parts = json::array();
  for (const json& p : content) {
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "input_text" || type == "output_text" || type == "text") {
      parts.push_back({{"type", "text"}, {"text", str_field(p, "text", "a text part")}});
    } else if (type == "refusal") {
      parts.push_back({{"type", "text"}, {"text", str_field(p, "refusal", "a refusal part")}});
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw_bad_request(fmt::format("'{}' parts are not supported: this server's models take text only", type),
                        "input");
    } else {
      throw_bad_request(fmt::format("content part type '{}' is not supported", type), "input");
    }
  }
  return parts;
}

// The text of a reasoning item (its content, else its summary).
std::string reasoning_text(const json& item) {
  std::string out;
  for (const char* key : {"content", "summary"}) {
    if (!item.contains(key) || !item[key].is_array()) continue;
    for (const json& p : item[key])
      if (p.is_object() && p.contains("text") && p["text"].is_string()) out += p["text"].get<std::string>();
    if (!out.empty()) break;
  }
  return out;
}

// The assistant message the next assistant item joins (the last message, when it is an assistant's).
json& assistant_tail(json& messages) {
  if (messages.empty() || messages.back().value("role", "") != "assistant")
    messages.push_back({{"role", "assistant"}, {"content", ""}});
  return messages.back();
}

void convert_item(const json& item, json& messages) {
  if (!item.is_object()) throw_bad_request("each input item must be an object", "input");
  const std::string type = item.value("type", item.contains("role") ? "message" : "");
  if (type == "message") {
    const std::string role = item.value("role", "");
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      throw_bad_request(fmt::format("message role '{}' is not one of user, system, developer, assistant", role), "input");
    if (!item.contains("content")) throw_bad_request("a message item needs 'content'", "input");
    json content = message_content(item["content"]);
    if (role != "assistant") {
      messages.push_back({{"role", role}, {"content", std::move(content)}});
      return;
    }
    json& a = assistant_tail(messages);
    if (a["content"].is_string() && a["content"].get<std::string>().empty()) {
      a["content"] = std::move(content);
    } else {  // a second message in the same turn: its parts appended
      json parts = a["content"].is_array() ? a["content"] : json::array({{{"type", "text"}, {"text", a["content"]}}});
      if (content.is_string()) content = json::array({{{"type", "text"}, {"text", content}}});
      for (json& p : content) parts.push_back(std::move(p));
      a["content"] = std::move(parts);
    }
  } else if (type == "function_call") {
    json& a = assistant_tail(messages);
    if (!a.contains("tool_calls")) a["tool_calls"] = json::array();
    a["tool_calls"].push_back({{"id", str_field(item, "call_id", "a function_call item")},
                               {"type", "function"},
                               {"function",
                                {{"name", str_field(item, "name", "a function_call item")},
                                 {"arguments", str_field(item, "arguments", "a function_call item")}}}});
  } else if (type == "function_call_output") {
    const std::string id = str_field(item, "call_id", "a function_call_output item");
    const json* out = field(item, "output");
    if (!out) throw_bad_request("a function_call_output item needs 'output'", "input");
    std::string text;
    if (out->is_string()) {
      text = out->get<std::string>();
    } else {
      const json parts = message_content(*out);
      for (const json& p : parts) text += p["text"].get<std::string>();
    }
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
  } else if (type == "reasoning") {
    const std::string text = reasoning_text(item);
    if (!text.empty()) {
      json& a = assistant_tail(messages);
      a["reasoning_content"] = a.value("reasoning_content", "") + text;
    }
  } else if (type == "item_reference") {
    throw_bad_request("an 'item_reference' item names a stored item; it is resolved by the server's store, and "
                      "this one was not",
                      "input");
  } else {
    throw_bad_request(fmt::format("input item type '{}' is not supported", type), "input");
  }
}

json convert_tools(const json& tools) {
  if (!tools.is_array()) throw_bad_request("'tools' must be a list", "tools");
  json out = json::array();
  for (const json& t : tools) {
    if (!t.is_object()) throw_bad_request("each tool must be an object", "tools");
    const std::string type = t.value("type", "");
    if (type != "function")
      throw_bad_request(fmt::format("tool type '{}' (a built-in tool) is not supported; give function tools", type),
                        "tools");
    json fn = {{"name", str_field(t, "name", "a function tool", "tools")}};
    for (const char* key : {"description", "parameters", "strict"})
      if (const json* v = field(t, key)) fn[key] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json convert_tool_choice(const json& tc) {
  if (tc.is_string()) return tc;
  if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("name"))
    return json{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  throw_bad_request("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\"}",
                    "tool_choice");
}

json convert_text_format(const json& text) {
  if (!text.is_object()) throw_bad_request("'text' must be an object", "text");
  const json* f = field(text, "format");
  if (!f) return nullptr;
  if (!f->is_object()) throw_bad_request("'text.format' must be an object", "text");
  const std::string type = f->value("type", "");
  if (type == "text") return nullptr;
  if (type == "json_object") return json{{"type", "json_object"}};
  if (type == "json_schema") {
    json js = {{"name", f->value("name", "response")}};
    if (f->contains("schema")) js["schema"] = (*f)["schema"];
    if (f->contains("strict")) js["strict"] = (*f)["strict"];
    return json{{"type", "json_schema"}, {"json_schema", std::move(js)}};
  }
  throw_bad_request(fmt::format("text.format type '{}' is not one of text, json_object, json_schema", type), "text");
}

json usage_json_of(const ChatUsage& u) {
  return json{{"input_tokens", u.prompt},
              {"input_tokens_details", {{"cached_tokens", u.cached}}},
              {"output_tokens", u.completion},
              {"output_tokens_details", {{"reasoning_tokens", 0}}},
              {"total_tokens", u.prompt + u.completion}};
}

json text_part(const std::string& text) {
  return json{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json reasoning_item(const std::string& id, const std::string& text) {
  return json{{"type", "reasoning"},
              {"id", id},
              {"summary", json::array()},
              {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json message_item(const std::string& id, const std::string& text, const char* status) {
  return json{{"type", "message"},
              {"id", id},
              {"status", status},
              {"role", "assistant"},
              {"content", text.empty() && std::string(status) != "completed" ? json::array() : json::array({text_part(text)})}};
}

json call_item(const std::string& id, const json& tc, const std::string& arguments, const char* status) {
  const json fn = tc.value("function", json::object());
  return json{{"type", "function_call"},
              {"id", id},
              {"call_id", tc.value("id", "")},
              {"name", fn.value("name", "")},
              {"arguments", arguments},
              {"status", status}};
}

int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

json input_items_of(const json& body) {
  const json* input = body.is_object() ? field(body, "input") : nullptr;
  if (input && input->is_string())
    return json::array({{{"type", "message"}, {"role", "user"},
                         {"content", json::array({{{"type", "input_text"}, {"text", *input}}})}}});
  return input && input->is_array() ? *input : json::array();
}

json responses_to_chat(const json& body) {
  if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
  if (const json* conv = field(body, "conversation"))
    throw_bad_request("'conversation': conversations are not stored by this server; send them in 'input'",
                      "conversation");
  json messages = json::array();
  if (const json* ins = field(body, "instructions")) {
    if (!ins->is_string()) throw_bad_request("'instructions' must be a string", "instructions");
    messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  const json* input = field(body, "input");
  if (!input) throw_bad_request("'input' is required", "input");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (const json& item : *input) convert_item(item, messages);
  } else {
    throw_bad_request("'input' must be a string or a list of items", "input");
  }
  json chat = {{"messages", std::move(messages)}};
  if (const json* t = field(body, "tools")) {
    json tools = convert_tools(*t);
    if (!tools.empty()) chat["tools"] = std::move(tools);
  }
  if (const json* tc = field(body, "tool_choice")) chat["tool_choice"] = convert_tool_choice(*tc);
  if (const json* t = field(body, "text"))
    if (json rf = convert_text_format(*t); !rf.is_null()) chat["response_format"] = std::move(rf);
  if (const json* r = field(body, "reasoning")) {
    if (!r->is_object()) throw_bad_request("'reasoning' must be an object", "reasoning");
    if (const json* effort = field(*r, "effort")) chat["reasoning_effort"] = *effort;
  }
  if (const json* m = field(body, "max_output_tokens")) chat["max_tokens"] = *m;
  for (const char* key : {"model", "temperature", "top_p", "parallel_tool_calls", "stream", "user", "truncation", "seed",
                          "top_k", "min_p", "repetition_penalty", "chat_template_kwargs"})
    if (const json* v = field(body, key)) chat[key] = *v;
  if (chat.value("stream", false))
    chat["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  return chat;
}

json response_settings(const json& body, bool stored) {
  auto get = [&](const char* key, json dflt) {
    const json* v = body.is_object() ? field(body, key) : nullptr;
    return v ? *v : dflt;
  };
  return json{{"instructions", get("instructions", nullptr)},
              {"max_output_tokens", get("max_output_tokens", nullptr)},
              {"temperature", get("temperature", nullptr)},
              {"top_p", get("top_p", nullptr)},
              {"tools", get("tools", json::array())},
              {"tool_choice", get("tool_choice", "auto")},
              {"parallel_tool_calls", get("parallel_tool_calls", true)},
              {"text", get("text", json{{"format", {{"type", "text"}}}})},
              {"reasoning", get("reasoning", json{{"effort", nullptr}})},
              {"truncation", get("truncation", "disabled")},
              {"metadata", get("metadata", json::object())},
              {"user", get("user", nullptr)},
              {"previous_response_id", get("previous_response_id", nullptr)},
              {"store", stored},
              {"error", nullptr}};
}

json chat_to_response(const json& chat, const json& settings) {
  const json& choice = chat.at("choices").at(0);
  const json& msg = choice.at("message");
  const std::string id = chat_id_suffix(chat);
  json output = json::array();
  if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string() &&
      !msg["reasoning_content"].get<std::string>().empty())
    output.push_back(reasoning_item("rs_" + id, msg["reasoning_content"]));
  if (msg.contains("content") && msg["content"].is_string() && !msg["content"].get<std::string>().empty())
    output.push_back(message_item("msg_" + id, msg["content"], "completed"));
  if (msg.contains("tool_calls") && msg["tool_calls"].is_array()) {
    int k = 0;
    for (const json& tc : msg["tool_calls"])
      output.push_back(call_item(fmt::format("fc_{}_{}", id, k++), tc, tc["function"].value("arguments", ""), "completed"));
  }
  ChatUsage u;
  u.update(chat.at("usage"));
  const bool incomplete = choice.value("finish_reason", "") == "length";
  json res = json{{"id", "resp_" + id},
                  {"object", "response"},
                  {"created_at", chat.value("created", now_unix())},
                  {"status", incomplete ? "incomplete" : "completed"},
                  {"incomplete_details", incomplete ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
                  {"model", chat.value("model", "")},
                  {"output", std::move(output)},
                  {"usage", usage_json_of(u)}};
  for (auto it = settings.begin(); it != settings.end(); ++it) res[it.key()] = it.value();  // after the result's own
  return res;
}

std::string ResponsesStream::emit(const char* type, json data) {
  data["type"] = type;
  data["sequence_number"] = seq_++;
  return fmt::format("event: {}\ndata: {}\n\n", type, dump_json(data));
}

json ResponsesStream::response_object(const char* status) const {
  const bool incomplete = !incomplete_.empty();
  json res = json{{"id", id_},
                  {"object", "response"},
                  {"created_at", created_},
                  {"status", status},
                  {"incomplete_details", incomplete ? json{{"reason", incomplete_}} : json(nullptr)},
                  {"model", model_},
                  {"output", output_},
                  {"usage", std::string(status) == "in_progress"
                                ? json(nullptr)
                                : usage_json_of(usage_)}};
  for (auto it = settings_.begin(); it != settings_.end(); ++it) res[it.key()] = it.value();
  return res;
}

std::string ResponsesStream::open(Item kind, const json& chat_tool_call) {
  std::string out = close();
  item_ = kind;
  text_.clear();
  const int64_t index = static_cast<int64_t>(output_.size());
  const std::string base = id_.substr(5);  // resp_<id>
  json item;
  if (kind == Item::Reasoning) {
    item_id_ = fmt::format("rs_{}_{}", base, index);
    item = {{"type", "reasoning"}, {"id", item_id_}, {"summary", json::array()}, {"content", json::array()}};
  } else if (kind == Item::Message) {
    item_id_ = fmt::format("msg_{}_{}", base, index);
    item = message_item(item_id_, "", "in_progress");
  } else {
    item_id_ = fmt::format("fc_{}_{}", base, index);
    call_ = chat_tool_call;
    item = call_item(item_id_, call_, "", "in_progress");
  }
  out += emit("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
  if (kind == Item::Message)
    out += emit("response.content_part.added",
                {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", text_part("")}});
  return out;
}

std::string ResponsesStream::close() {
  if (item_ == Item::None) return "";
  const int64_t index = static_cast<int64_t>(output_.size());
  std::string out;
  json item;
  if (item_ == Item::Reasoning) {
    out += emit("response.reasoning_text.done",
                {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", text_}});
    item = reasoning_item(item_id_, text_);
  } else if (item_ == Item::Message) {
    out += emit("response.output_text.done", {{"item_id", item_id_},
                                              {"output_index", index},
                                              {"content_index", 0},
                                              {"text", text_},
                                              {"logprobs", json::array()}});
    out += emit("response.content_part.done",
                {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", text_part(text_)}});
    item = message_item(item_id_, text_, "completed");
  } else {
    out += emit("response.function_call_arguments.done",
                {{"item_id", item_id_}, {"output_index", index}, {"arguments", text_}});
    item = call_item(item_id_, call_, text_, "completed");
  }
  out += emit("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  item_ = Item::None;
  return out;
}

std::string ResponsesStream::chunk(const json& c) {
  if (finished_ || !c.is_object()) return "";
  if (const json* u = field(c, "usage")) usage_.update(*u);
  std::string out;
  if (!started_) {
    started_ = true;
    id_ = "resp_" + chat_id_suffix(c);
    model_ = c.value("model", "");
    created_ = c.value("created", now_unix());
    out += emit("response.created", {{"response", response_object("in_progress")}});
    out += emit("response.in_progress", {{"response", response_object("in_progress")}});
  }
  if (!c.contains("choices") || !c["choices"].is_array() || c["choices"].empty()) return out;
  const json& choice = c["choices"][0];
  const json delta = choice.value("delta", json::object());
  if (const std::string r = string_field(delta, "reasoning_content"); !r.empty()) {
    if (item_ != Item::Reasoning) out += open(Item::Reasoning);
    text_ += r;
    out += emit("response.reasoning_text.delta",
                {{"item_id", item_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", r}});
  }
  if (const std::string t = string_field(delta, "content"); !t.empty()) {
    if (item_ != Item::Message) out += open(Item::Message);
    text_ += t;
    out += emit("response.output_text.delta", {{"item_id", item_id_},
                                               {"output_index", output_.size()},
                                               {"content_index", 0},
                                               {"delta", t},
                                               {"logprobs", json::array()}});
  }
  if (delta.contains("tool_calls") && delta["tool_calls"].is_array())
    for (const json& tc : delta["tool_calls"]) {
      const int idx = tc.value("index", 0);
      if (tc.contains("id")) {
        tool_index_ = idx;
        out += open(Item::FunctionCall, tc);
      } else if (item_ != Item::FunctionCall || idx != tool_index_) {
        continue;  // the rest of a call whose item is closed
      }
      const json fn = tc.value("function", json::object());
      if (const std::string args = string_field(fn, "arguments"); !args.empty()) {
        text_ += args;
        out += emit("response.function_call_arguments.delta",
                    {{"item_id", item_id_}, {"output_index", output_.size()}, {"delta", args}});
      }
    }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    out += close();
    if (choice["finish_reason"] == "length") incomplete_ = "max_output_tokens";
    const bool incomplete = !incomplete_.empty();
    result_ = response_object(incomplete ? "incomplete" : "completed");
    out += emit(incomplete ? "response.incomplete" : "response.completed", {{"response", result_}});
    finished_ = true;
  }
  return out;
}

std::string ResponsesStream::error(const json& error_body) {
  const ApiError e = chat_error(500, error_body);
  finished_ = true;
  return emit("error", {{"code", e.code.empty() ? json(nullptr) : json(e.code)},
                        {"message", e.message},
                        {"param", e.param.empty() ? json(nullptr) : json(e.param)}});
}

}  // namespace tmill::server
