// POST /tokenize and POST /detokenize in vLLM's shapes:
//   /tokenize   {"prompt": "text", "add_special_tokens": true, "return_token_strs": false}
//            or {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false, ...}
//            -> {"count": N, "max_model_len": L, "tokens": [...], "token_strs": null | [...]}
//   /detokenize {"tokens": [...]} -> {"prompt": "text"}
// and llama-server's (its clients send "content"):
//   /tokenize   {"content": "text" | [ids and strings], "add_special": false, "parse_special": true,
//                "with_pieces": false} -> {"tokens": [ids] | [{"id", "piece"}], "count", "max_model_len"}
//   /detokenize -> "content" too
#include "chat/messages.h"
#include "core/strings.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

HttpResponse Server::route_tokenize(HttpRequest& req) {
  try {
    json body = parse_body(req.body);
    ApiError err;
    auto lease = lease_model(body, &err);
    if (!lease.ok()) throw RequestError{err};
    const ServerContext& ctx_ = lease->model().ctx;
    body["model"] = ctx_.served_model_name;
    const Tokenizer& tok = *ctx_.tokenizer;
    std::vector<int32_t> ids;
    if (const json* content = field(body, "content"); content && !field(body, "prompt") && !field(body, "messages")) {
      const bool add_special = opt_bool(body, "add_special").value_or(false);
      const bool parse_special = opt_bool(body, "parse_special").value_or(true);
      if (!content->is_array() && !content->is_string())
        throw_bad_request("'content' must be a string or an array of token ids and strings", "content");
      ids = detail::tokenize_mixed(*content, tok, add_special, parse_special, [&](const json& e) {
        return static_cast<int32_t>(as_int(e, "content", 0, ctx_.n_vocab - 1));
      });
      json out;
      if (opt_bool(body, "with_pieces").value_or(false)) {
        json pieces = json::array();
        for (int32_t id : ids) {
          const std::string piece = tok.token_to_piece(id);
          pieces.push_back({{"id", id}, {"piece", is_valid_utf8(piece) ? json(piece) : bytes_json(piece)}});
        }
        out["tokens"] = std::move(pieces);
      } else {
        out["tokens"] = ids;
      }
      out["count"] = ids.size();
      out["max_model_len"] = ctx_.max_model_len;
      return reply_json(out);
    }
    if (field(body, "messages")) {
      ApiError err;
      auto rendered = render_chat_prompt(body, ctx_, &err);
      if (!rendered.ok()) throw RequestError{err};
      ids = tokenize_chat_prompt(*rendered, tok, opt_bool(body, "add_special_tokens").value_or(false));
    } else {
      auto prompt = opt_string(body, "prompt");
      if (!prompt) throw_bad_request("'prompt' (a string) or 'messages' is required", "prompt");
      ids = tok.encode(*prompt, opt_bool(body, "add_special_tokens").value_or(true), /*parse_special=*/true);
    }
    json out;
    out["count"] = ids.size();
    out["max_model_len"] = ctx_.max_model_len;
    out["tokens"] = ids;
    if (opt_bool(body, "return_token_strs").value_or(false)) {
      json strs = json::array();
      for (int32_t id : ids) strs.push_back(token_string(tok, id));
      out["token_strs"] = std::move(strs);
    } else {
      out["token_strs"] = nullptr;
    }
    return reply_json(out);
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
}

HttpResponse Server::route_detokenize(HttpRequest& req) {
  try {
    json body = parse_body(req.body);
    ApiError err;
    auto lease = lease_model(body, &err);
    if (!lease.ok()) throw RequestError{err};
    const ServerContext& ctx_ = lease->model().ctx;
    const json* tokens = field(body, "tokens");
    if (!tokens) throw_bad_request("'tokens' is required", "tokens");
    if (!tokens->is_array()) throw_bad_request("'tokens' must be an array of token ids", "tokens");
    std::vector<int32_t> ids;
    for (const json& v : *tokens) ids.push_back(static_cast<int32_t>(as_int(v, "tokens", 0, ctx_.n_vocab - 1)));
    const std::string text = ctx_.tokenizer->decode(ids);
    return reply_json(json{{"prompt", text}, {"content", text}});  // vLLM's name and llama-server's
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
}

}  // namespace tmill::server
