// Anthropic's Messages API (anthropic.h): POST /v1/messages runs the chat route on the translated
// body and translates its answer back -- the JSON, the error, or the stream event by event through a
// sink that rewrites the chat chunks as they are written; POST /v1/messages/count_tokens counts the
// prompt the chat template renders.
#include "chat/messages.h"
#include "server/anthropic.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

// The chat stream's SSE events ("data: {...}\n\n", "data: [DONE]\n\n") in, Anthropic's out.
struct AnthropicRewrite {
  AnthropicStream stream;
  std::string pending;  // an event not yet complete
};

class RewritingSink final : public ChunkSink {
 public:
  RewritingSink(ChunkSink& inner, AnthropicRewrite& st) : inner_(inner), st_(st) {}
  bool write(std::string_view data) override {
    st_.pending.append(data);
    std::string out;
    size_t end;
    while ((end = st_.pending.find("\n\n")) != std::string::npos) {
      const std::string ev = st_.pending.substr(0, end);
      st_.pending.erase(0, end + 2);
      if (ev.compare(0, 6, "data: ") != 0) continue;
      const std::string data_text = ev.substr(6);
      if (data_text == "[DONE]") continue;
      const json j = json::parse(data_text, nullptr, false);
      if (j.is_discarded()) continue;
      out += j.contains("error") ? st_.stream.error(j) : st_.stream.chunk(j);
    }
    return out.empty() || inner_.write(out);
  }
  void done() override { inner_.done(); }

 private:
  ChunkSink& inner_;
  AnthropicRewrite& st_;
};

HttpResponse anthropic_reply(const ApiError& e) {
  HttpResponse res;
  res.status = e.status;
  res.content_type = "application/json";
  res.body = dump_json(anthropic_error(e));
  return res;
}

// The chat route's answer in Anthropic's shape.
HttpResponse to_anthropic(HttpResponse res) {
  if (res.next_chunk) {
    auto st = std::make_shared<AnthropicRewrite>();
    res.next_chunk = [inner = std::move(res.next_chunk), st](ChunkSink& sink) {
      RewritingSink rewrite(sink, *st);
      return inner(rewrite);
    };
    return res;
  }
  const json j = json::parse(res.body, nullptr, false);
  if (res.status == 200 && j.is_object() && j.contains("choices")) {
    res.body = dump_json(chat_to_anthropic(j));
  } else if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    ApiError e;
    e.status = res.status;
    e.message = j["error"].value("message", "");
    res.body = dump_json(anthropic_error(e));
  }
  return res;
}

}  // namespace

HttpResponse Server::route_messages(HttpRequest& req) {
  json chat;
  try {
    chat = anthropic_to_chat(parse_body(req.body));
  } catch (const RequestError& e) {
    metrics_->on_failure("invalid_request");
    return anthropic_reply(e.error);
  }
  req.body = chat.dump();
  return to_anthropic(handle_generate(req, ApiKind::Chat));
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
    metrics_->on_failure(e.error.status == 404 ? "not_found" : e.error.status == 503 ? "unavailable" : "invalid_request");
    return anthropic_reply(e.error);
  }
}

}  // namespace tmill::server
