// POST /tokenize and POST /detokenize in vLLM's shapes:
//   /tokenize   {"prompt": "text", "add_special_tokens": true, "return_token_strs": false}
//            or {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false, ...}
//            -> {"count": N, "max_model_len": L, "tokens": [...], "token_strs": null | [...]}
//   /detokenize {"tokens": [...]} -> {"prompt": "text"}
#include "chat/messages.h"
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
    return reply_error(e.error, e.error.status == 404   ? "not_found"
                                : e.error.status == 503 ? "unavailable"
                                                        : "invalid_request");
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
    return reply_json(json{{"prompt", ctx_.tokenizer->decode(ids)}});
  } catch (const RequestError& e) {
    return reply_error(e.error, e.error.status == 404   ? "not_found"
                                : e.error.status == 503 ? "unavailable"
                                                        : "invalid_request");
  }
}

}  // namespace tmill::server
