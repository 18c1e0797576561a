// Another API served by the chat route (anthropic.h, responses.h): the chat route's HttpResponse
// rewritten into that API's -- its JSON result, its error body, or its stream, each chat chunk
// rewritten as it is written (the chat stream's "data: [DONE]" dropped).
#pragma once

#include <functional>
#include <string>

#include "server/api_error.h"
#include "server/http.h"

namespace tmill::server {

struct ChatAdapter {
  std::function<json(const json& chat)> result;                 // a chat.completion -> the API's result
  std::function<json(int status, const json& error)> error;     // an error body -> the API's
  std::function<std::string(const json& chunk)> chunk;          // a chat.completion.chunk -> SSE text
  std::function<std::string(const json& error)> stream_error;   // a stream's {"error": ...} -> SSE text
};

HttpResponse adapt_chat_response(HttpResponse res, ChatAdapter adapter);

// Reading chat results and chunks (the adapters' common ground).
struct ChatUsage {
  int64_t prompt = 0, cached = 0, completion = 0;
  void update(const json& usage);  // a chat "usage" object (absent fields keep their values)
};
std::string chat_id_suffix(const json& chat);                  // its "id" without "chatcmpl-"
std::string string_field(const json& obj, const char* key);     // "" when absent or not a string
// An OpenAI error body ({"error": {"message", "code", "param"}}) read back, with `status`.
ApiError chat_error(int status, const json& error_body);

}  // namespace tmill::server
