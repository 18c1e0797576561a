#include "server/anthropic.h"

#include <fmt/format.h>

#include "server/openai_response.h"
#include "server/request_fields.h"

namespace tmill::server {

namespace {

std::string type_of(const json& block, const char* where) {
  if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
    throw_bad_request(fmt::format("each block of {} must be an object with a string 'type'", where), where);
  return block["type"].get<std::string>();
}

std::string text_of_block(const json& block, const char* where) {
  if (!block.contains("text") || !block["text"].is_string())
    throw_bad_request(fmt::format("a text block of {} needs a string 'text'", where), where);
  return block["text"].get<std::string>();
}

[[noreturn]] void refuse_media(const std::string& type, const char* where) {
  throw_bad_request(fmt::format("'{}' blocks are not supported: this server's models take text only", type), where);
}

// A tool_result's content: a string, or text blocks joined.
std::string tool_result_text(const json& block) {
  const json* c = field(block, "content");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) throw_bad_request("a tool_result's 'content' must be a string or a list of blocks", "messages");
  std::string out;
  for (const json& b : *c) {
    const std::string t = type_of(b, "messages");
    if (t != "text") refuse_media(t, "messages");
    out += text_of_block(b, "messages");
  }
  return out;
}

json convert_message(const json& msg, json& out_messages) {
  if (!msg.is_object()) throw_bad_request("each message must be an object", "messages");
  const std::string role = msg.value("role", "");
  if (role != "user" && role != "assistant")
    throw_bad_request(fmt::format("message role '{}' is not one of \"user\", \"assistant\" (the system prompt is "
                                  "'system')",
                                  role),
                      "messages");
  const json* content = field(msg, "content");
  if (!content) throw_bad_request("each message needs 'content'", "messages");
  if (content->is_string()) return json{{"role", role}, {"content", *content}};
  if (!content->is_array()) throw_bad_request("a message's 'content' must be a string or a list of blocks", "messages");
  json parts = json::array(), tool_calls = json::array();
  std::string reasoning;
  for (const json& b : *content) {
    const std::string t = type_of(b, "messages");
    if (t == "text") {
      parts.push_back({{"type", "text"}, {"text", text_of_block(b, "messages")}});
    } else if (t == "thinking") {
      if (b.contains("thinking") && b["thinking"].is_string()) reasoning += b["thinking"].get<std::string>();
    } else if (t == "redacted_thinking") {
      // encrypted by Anthropic's servers: nothing a local model can read
    } else if (t == "tool_use") {
      if (role != "assistant") throw_bad_request("'tool_use' blocks belong to assistant messages", "messages");
      const std::string id = b.value("id", "");
      const std::string name = b.value("name", "");
      if (id.empty() || name.empty()) throw_bad_request("a tool_use block needs 'id' and 'name'", "messages");
      const json input = b.contains("input") ? b["input"] : json::object();
      tool_calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", input.dump()}}}});
    } else if (t == "tool_result") {
      if (role != "user") throw_bad_request("'tool_result' blocks belong to user messages", "messages");
      const std::string id = b.value("tool_use_id", "");
      if (id.empty()) throw_bad_request("a tool_result block needs 'tool_use_id'", "messages");
      std::string text = tool_result_text(b);
      if (b.value("is_error", false)) text = "Error: " + text;
      // The chat shape: tool results are messages of their own, right after the assistant's calls
      // (Anthropic puts them first in the user turn, so they come before its text here too).
      out_messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
    } else if (t == "image" || t == "document" || t == "audio") {
      refuse_media(t, "messages");
    } else {
      throw_bad_request(fmt::format("content block type '{}' is not supported", t), "messages");
    }
  }
  if (parts.empty() && tool_calls.empty() && reasoning.empty()) return nullptr;  // only tool results
  json m = {{"role", role}, {"content", parts.empty() ? json("") : parts}};
  if (!tool_calls.empty()) m["tool_calls"] = std::move(tool_calls);
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  return m;
}

json convert_tool_choice(const json& tc, json& chat) {
  if (!tc.is_object()) throw_bad_request("'tool_choice' must be an object with a 'type'", "tool_choice");
  const std::string type = tc.value("type", "");
  if (tc.value("disable_parallel_tool_use", false)) chat["parallel_tool_calls"] = false;
  if (type == "auto") return "auto";
  if (type == "any") return "required";
  if (type == "none") return "none";
  if (type == "tool") {
    const std::string name = tc.value("name", "");
    if (name.empty()) throw_bad_request("tool_choice type 'tool' needs a 'name'", "tool_choice");
    return json{{"type", "function"}, {"function", {{"name", name}}}};
  }
  throw_bad_request(fmt::format("tool_choice type '{}' is not one of auto, any, tool, none", type), "tool_choice");
}

std::string stop_reason_of(const json& choice) {
  const std::string finish = choice.value("finish_reason", "");
  if (finish == "tool_calls") return "tool_use";
  if (finish == "length") return "max_tokens";
  if (choice.contains("stop_reason") && choice["stop_reason"].is_string()) return "stop_sequence";
  return "end_turn";
}

std::string message_id(const json& chat) { return "msg_" + chat_id_suffix(chat); }

json usage_of(const ChatUsage& u, bool with_output = true) {
  return json{{"input_tokens", u.prompt - u.cached},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", u.cached},
              {"output_tokens", with_output ? u.completion : 0}};
}

std::string event(const char* name, const json& data) {
  return fmt::format("event: {}\ndata: {}\n\n", name, dump_json(data));
}

}  // namespace

json anthropic_to_chat(const json& body) {
  if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
  json chat = json::object();
  json messages = json::array();
  if (const json* sys = field(body, "system")) {
    std::string text;
    if (sys->is_string()) {
      text = sys->get<std::string>();
    } else if (sys->is_array()) {
      for (const json& b : *sys) {
        const std::string t = type_of(b, "system");
        if (t != "text") refuse_media(t, "system");
        text += (text.empty() ? "" : "\n") + text_of_block(b, "system");
      }
    } else {
      throw_bad_request("'system' must be a string or a list of text blocks", "system");
    }
    messages.push_back({{"role", "system"}, {"content", text}});
  }
  const json* msgs = field(body, "messages");
  if (!msgs || !msgs->is_array()) throw_bad_request("'messages' (a list) is required", "messages");
  for (const json& m : *msgs) {
    json converted = convert_message(m, messages);
    if (!converted.is_null()) messages.push_back(std::move(converted));
  }
  chat["messages"] = std::move(messages);
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw_bad_request("'tools' must be a list", "tools");
    json out = json::array();
    for (const json& t : *tools) {
      if (!t.is_object()) throw_bad_request("each tool must be an object", "tools");
      const std::string type = t.value("type", "custom");
      if (type != "custom")
        throw_bad_request(fmt::format("tool type '{}' (a server tool) is not supported; give custom tools with "
                                      "'name' and 'input_schema'",
                                      type),
                          "tools");
      if (!t.contains("name") || !t["name"].is_string()) throw_bad_request("each tool needs a 'name'", "tools");
      json fn = {{"name", t["name"]}, {"parameters", t.contains("input_schema") ? t["input_schema"] : json::object()}};
      if (t.contains("description")) fn["description"] = t["description"];
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(out);
  }
  if (const json* tc = field(body, "tool_choice")) chat["tool_choice"] = convert_tool_choice(*tc, chat);
  if (const json* stop = field(body, "stop_sequences")) chat["stop"] = *stop;
  for (const char* key : {"model", "max_tokens", "temperature", "top_p", "top_k", "stream", "chat_template_kwargs"})
    if (const json* v = field(body, key)) chat[key] = *v;
  if (const json* th = field(body, "thinking")) {
    if (!th->is_object()) throw_bad_request("'thinking' must be an object with a 'type'", "thinking");
    const std::string type = th->value("type", "");
    if (type != "enabled" && type != "disabled")
      throw_bad_request(fmt::format("thinking type '{}' is not one of enabled, disabled", type), "thinking");
    if (!chat.contains("chat_template_kwargs") || !chat["chat_template_kwargs"].is_object())
      chat["chat_template_kwargs"] = json::object();
    chat["chat_template_kwargs"]["enable_thinking"] = type == "enabled";
  }
  if (chat.value("stream", false))  // the stream translator reads usage from every chunk
    chat["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  return chat;
}

json chat_to_anthropic(const json& chat) {
  const json& choice = chat.at("choices").at(0);
  const json& msg = choice.at("message");
  json content = json::array();
  if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string() &&
      !msg["reasoning_content"].get<std::string>().empty())
    content.push_back({{"type", "thinking"}, {"thinking", msg["reasoning_content"]}, {"signature", ""}});
  if (msg.contains("content") && msg["content"].is_string() && !msg["content"].get<std::string>().empty())
    content.push_back({{"type", "text"}, {"text", msg["content"]}});
  if (msg.contains("tool_calls") && msg["tool_calls"].is_array())
    for (const json& tc : msg["tool_calls"]) {
      json input = json::parse(tc["function"].value("arguments", "{}"), nullptr, false);
      if (!input.is_object()) input = json::object();
      content.push_back({{"type", "tool_use"}, {"id", tc.value("id", "")}, {"name", tc["function"].value("name", "")},
                         {"input", std::move(input)}});
    }
  ChatUsage u;
  u.update(chat.at("usage"));
  const std::string stop = stop_reason_of(choice);
  return json{{"id", message_id(chat)},
              {"type", "message"},
              {"role", "assistant"},
              {"model", chat.value("model", "")},
              {"content", std::move(content)},
              {"stop_reason", stop},
              {"stop_sequence", stop == "stop_sequence" ? choice["stop_reason"] : json(nullptr)},
              {"usage", usage_of(u)}};
}

json anthropic_error(const ApiError& e) {
  const char* type = e.status == 401   ? "authentication_error"
                     : e.status == 403 ? "permission_error"
                     : e.status == 404 ? "not_found_error"
                     : e.status == 413 ? "request_too_large"
                     : e.status == 429 ? "rate_limit_error"
                     : e.status == 503 ? "overloaded_error"
                     : e.status >= 500 ? "api_error"
                                       : "invalid_request_error";
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

std::string AnthropicStream::open(Block kind, json content_block) {
  std::string out = close();
  block_ = kind;
  ++index_;
  out += event("content_block_start",
               {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
  return out;
}

std::string AnthropicStream::close() {
  if (block_ == Block::None) return "";
  block_ = Block::None;
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStream::start(const json& c) {
  started_ = true;
  id_ = message_id(c);
  model_ = c.value("model", "");
  return event("message_start", {{"type", "message_start"},
                                 {"message",
                                  {{"id", id_},
                                   {"type", "message"},
                                   {"role", "assistant"},
                                   {"model", model_},
                                   {"content", json::array()},
                                   {"stop_reason", nullptr},
                                   {"stop_sequence", nullptr},
                                   {"usage", usage_of(usage_, /*with_output=*/false)}}}});
}

std::string AnthropicStream::chunk(const json& c) {
  if (finished_ || !c.is_object()) return "";
  if (const json* u = field(c, "usage")) usage_.update(*u);
  std::string out;
  if (!started_) out += start(c);
  if (!c.contains("choices") || !c["choices"].is_array() || c["choices"].empty()) return out;
  const json& choice = c["choices"][0];
  const json delta = choice.value("delta", json::object());
  if (const std::string r = string_field(delta, "reasoning_content"); !r.empty()) {
    if (block_ != Block::Thinking) out += open(Block::Thinking, {{"type", "thinking"}, {"thinking", ""}});
    out += event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", {{"type", "thinking_delta"}, {"thinking", r}}}});
  }
  if (const std::string t = string_field(delta, "content"); !t.empty()) {
    if (block_ != Block::Text) out += open(Block::Text, {{"type", "text"}, {"text", ""}});
    out += event("content_block_delta",
                 {{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "text_delta"}, {"text", t}}}});
  }
  if (delta.contains("tool_calls") && delta["tool_calls"].is_array())
    for (const json& tc : delta["tool_calls"]) {
      const int idx = tc.value("index", 0);
      const json fn = tc.value("function", json::object());
      const bool open_now = block_ == Block::ToolUse && idx == tool_index_;
      if (!tc.contains("id") && !open_now) continue;  // the rest of a call whose block is closed: no block to add to
      if (tc.contains("id")) {
        tool_index_ = idx;
        out += open(Block::ToolUse, {{"type", "tool_use"},
                                     {"id", tc.value("id", "")},
                                     {"name", fn.value("name", "")},
                                     {"input", json::object()}});
      }
      if (const std::string args = string_field(fn, "arguments"); !args.empty())
        out += event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", index_},
                                             {"delta", {{"type", "input_json_delta"}, {"partial_json", args}}}});
    }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    const std::string stop = stop_reason_of(choice);
    out += close();
    out += event("message_delta",
                 {{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop}, {"stop_sequence", stop == "stop_sequence" ? choice["stop_reason"] : json(nullptr)}}},
                  {"usage", {{"output_tokens", usage_.completion}}}});
    out += event("message_stop", {{"type", "message_stop"}});
    finished_ = true;
  }
  return out;
}

std::string AnthropicStream::error(const json& error_body) {
  ApiError e = chat_error(500, error_body);
  if (e.code == "request_timeout") e.status = 408;
  finished_ = true;
  return event("error", anthropic_error(e));
}

}  // namespace tmill::server
