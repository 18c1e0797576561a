// Anthropic's Messages API (anthropic.h), served by the chat route: POST /v1/messages translates
// the body, runs handle_generate(Chat), and rewrites its answer (chat_adapter.h);
// POST /v1/messages/count_tokens counts the prompt the chat template renders. (OpenAI's Responses
// API, served the same way: routes_responses.cpp.)
#include <memory>

#include "chat/messages.h"
#include "server/anthropic.h"
#include "server/chat_adapter.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

HttpResponse Server::route_messages(HttpRequest& req) {
  json chat;
  try {
    chat = anthropic_to_chat(parse_body(req.body));
  } catch (const RequestError& e) {
    metrics_->on_failure("invalid_request");
    return reply_json(anthropic_error(e.error), e.error.status);
  }
  req.body = chat.dump();
  auto stream = std::make_shared<AnthropicStream>();
  ChatAdapter a;
  a.result = [](const json& c) { return chat_to_anthropic(c); };
  a.error = [](int status, const json& e) { return anthropic_error(chat_error(status, e)); };
  a.chunk = [stream](const json& c) { return stream->chunk(c); };
  a.stream_error = [stream](const json& e) { return stream->error(e); };
  return adapt_chat_response(handle_generate(req, ApiKind::Chat), std::move(a));
}

HttpResponse Server::route_count_tokens(HttpRequest& req) {
  try {
    json chat = anthropic_to_chat(parse_body(req.body));
    ApiError err;
    auto lease = lease_model(chat, &err);
    if (!lease.ok()) throw RequestError{err};
    const ServerContext& ctx = lease->model().ctx;
    chat["model"] = ctx.served_model_name;
    auto prompt = render_chat_prompt(chat, ctx, &err);
    if (!prompt.ok()) throw RequestError{err};
    const auto ids = tokenize_chat_prompt(*prompt, *ctx.tokenizer, false);
    return reply_json(json{{"input_tokens", ids.size()}});
  } catch (const RequestError& e) {
    metrics_->on_failure(request_failure_reason(e.error));
    return reply_json(anthropic_error(e.error), e.error.status);
  }
}

}  // namespace tmill::server
