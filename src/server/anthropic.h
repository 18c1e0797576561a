// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) over the chat route: the
// request is translated to an OpenAI chat body, generated like /v1/chat/completions, and the chat
// result (or each streamed chat chunk) translated back. Pure functions and one stateful stream
// translator, no I/O: unit-tested and fuzzed like the OpenAI mapping.
//
//   {"model", "max_tokens", "system": "..." | [{"type": "text", "text"}], "messages": [{"role",
//    "content": "..." | [{"type": "text"|"thinking"|"tool_use"|"tool_result", ...}]}],
//    "tools": [{"name", "description", "input_schema"}], "tool_choice": {"type": "auto"|"any"|
//    "tool"|"none", "name", "disable_parallel_tool_use"}, "stop_sequences", "temperature", "top_p",
//    "top_k", "stream", "thinking": {"type": "enabled"|"disabled"}, "metadata"}
//   -> {"id": "msg_...", "type": "message", "role": "assistant", "model", "content": [{"type":
//       "thinking"|"text"|"tool_use", ...}], "stop_reason": "end_turn"|"max_tokens"|"stop_sequence"|
//       "tool_use", "stop_sequence", "usage": {"input_tokens", "output_tokens",
//       "cache_read_input_tokens"}}
//   stream: event: message_start, content_block_start / _delta (text_delta, thinking_delta,
//   input_json_delta) / _stop, message_delta (stop_reason, usage), message_stop.
#pragma once

#include <string>

#include "server/api_error.h"
#include "server/chat_adapter.h"

namespace tmill::server {

// The chat body; throws RequestError (400 naming the field) for what cannot be translated: images
// and documents (text models), server tools (web search, ...), malformed blocks.
json anthropic_to_chat(const json& body);

// A chat.completion body -> an Anthropic message.
json chat_to_anthropic(const json& chat);

// An ApiError in Anthropic's shape: {"type": "error", "error": {"type", "message"}}.
json anthropic_error(const ApiError& e);

// The stream: feed each chat.completion.chunk (the chat body asked for usage on every chunk) and get
// the Anthropic SSE text it gives ("event: NAME\ndata: {...}\n\n"...; possibly empty).
class AnthropicStream {
 public:
  std::string chunk(const json& c);
  std::string error(const json& error_body);  // a chat stream's {"error": {...}} event
  bool finished() const { return finished_; }

 private:
  enum class Block { None, Thinking, Text, ToolUse };
  std::string open(Block kind, json content_block);
  std::string close();
  std::string start(const json& c);

  bool started_ = false, finished_ = false;
  Block block_ = Block::None;
  int index_ = -1;           // the open (or last) content block's index
  int tool_index_ = -1;      // the chat tool call the open tool_use block carries
  std::string id_, model_;
  ChatUsage usage_;
};

}  // namespace tmill::server
