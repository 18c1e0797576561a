// OpenAI's Responses API (POST /v1/responses) over the chat route, as anthropic.h does for Anthropic's:
// the request translated to a chat body, the chat result (or each streamed chat chunk) translated
// back. Pure functions and one stateful stream translator, no I/O.
//
//   {"model", "input": "text" | [items], "instructions", "max_output_tokens", "temperature",
//    "top_p", "tools": [{"type": "function", "name", "description", "parameters", "strict"}],
//    "tool_choice", "parallel_tool_calls", "text": {"format": {"type": "text" | "json_object" |
//    "json_schema", "name", "schema", "strict"}}, "reasoning": {"effort"}, "stream", "store",
//    "metadata", "user", "truncation"}
//   items: {"role": "user"|"system"|"developer"|"assistant", "content": "..." | [{"type":
//          "input_text"|"output_text", "text"}]}, {"type": "function_call", "call_id", "name",
//          "arguments"}, {"type": "function_call_output", "call_id", "output"}, {"type":
//          "reasoning", "content"|"summary": [{"text"}]}
//   -> {"id": "resp_...", "object": "response", "created_at", "status": "completed"|"incomplete",
//       "incomplete_details", "model", "output": [reasoning, message, function_call items],
//       "usage": {"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details",
//       "total_tokens"}, and the request's settings echoed}
//   stream: response.created, response.in_progress, then per item response.output_item.added,
//   its deltas (response.output_text.delta, response.reasoning_text.delta,
//   response.function_call_arguments.delta) and their .done events, response.output_item.done,
//   and response.completed (or response.incomplete); each with a sequence_number.
#pragma once

#include <string>

#include "server/api_error.h"
#include "server/chat_adapter.h"

namespace tmill::server {

// The chat body; throws RequestError (400 naming the field) for what cannot be translated: images and
// files (text models), built-in tools (web_search, file_search, ...), conversations, malformed
// items. previous_response_id and item_reference items are the route's (response_store.h): it puts
// the stored conversation in front of "input", and the stored items in place of their references,
// before calling this.
json responses_to_chat(const json& body);

// The request's "input" as a list of items (a string: one user message item).
json input_items_of(const json& body);

// The settings a response object echoes from its request (instructions, max_output_tokens, tools,
// previous_response_id, ...); `stored`: whether the response is kept (the request's "store").
json response_settings(const json& body, bool stored);

// A chat.completion body -> a response object (`settings` from response_settings).
json chat_to_response(const json& chat, const json& settings);

// An ApiError as the Responses API reports it: {"error": {"message", "type", "param", "code"}} (the
// OpenAI error body: unchanged, see api_error.h).

// The stream: feed each chat.completion.chunk (the chat body asked for usage on every chunk).
class ResponsesStream {
 public:
  explicit ResponsesStream(json settings) : settings_(std::move(settings)) {}
  std::string chunk(const json& c);
  std::string error(const json& error_body);  // a chat stream's {"error": {...}} event: response.failed
  bool finished() const { return finished_; }
  // The final response object once the stream completed (or ended incomplete); null otherwise.
  const json& result() const { return result_; }

 private:
  enum class Item { None, Reasoning, Message, FunctionCall };
  std::string emit(const char* type, json data);
  std::string open(Item kind, const json& chat_tool_call = nullptr);
  std::string close();
  json response_object(const char* status) const;

  json settings_;
  bool started_ = false, finished_ = false;
  int64_t seq_ = 0;
  Item item_ = Item::None;
  int tool_index_ = -1;  // the chat tool call the open function_call item carries
  std::string id_, model_, item_id_, text_;  // text_: the open item's text or arguments so far
  json call_;                                // the open function_call's item
  json output_ = json::array();              // finished items
  int64_t created_ = 0;
  ChatUsage usage_;
  std::string incomplete_;                   // "max_output_tokens" when the chat chunk says length
  json result_;                              // the final response object
};

}  // namespace tmill::server
