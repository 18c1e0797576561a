// llama-server's own routes beside the OpenAI ones, so its clients and scripts work unchanged
// (docs/server.md, "llama-server's API"):
//   POST /completion, /completions  llama_request.h / llama_response.h (through generate())
//   POST /infill                    the model's fill-in-the-middle prompt, then /completion
//   GET  /props                     the model, its context, the default generation settings
//   GET  /slots                     one entry per --max-num-seqs sequence; the first N are busy
//   POST /slots/ID?action=...       501: there are no per-slot caches to save, restore or erase
//   POST /apply-template            {"messages": [...]} -> {"prompt": the chat template's text}
//   POST /embedding, /embeddings    {"content": ...} -> [{"index", "embedding": [[...]]}]
// A GET route without a body answers for the default model (the first one).
#include <fmt/format.h>

#include "chat/chat_template.h"
#include "server/llama_request.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {
std::string piece_or_empty(const Tokenizer& tok, int32_t id) { return id >= 0 ? tok.token_to_piece(id) : std::string(); }
}  // namespace

HttpResponse Server::route_props(HttpRequest&) {
  ApiError err;
  auto lease = lease_model(json::object(), &err);
  if (!lease.ok()) return reply_error(err, request_failure_reason(err));
  const ServerContext& ctx = lease->model().ctx;
  const Engine& engine = *lease->model().engine;
  const Tokenizer& tok = *ctx.tokenizer;
  // The settings a /completion request without sampling fields gets: map one (a one-token prompt).
  json params = json::object();
  if (auto m = map_native_completion_request(json{{"prompt", json::array({std::max(tok.bos_id(), 0)})}}, ctx); m.ok())
    params = m->native.generation_settings;
  json props = {
      {"default_generation_settings", {{"params", std::move(params)}, {"n_ctx", ctx.max_model_len}}},
      {"total_slots", engine.config().max_num_seqs},
      {"model_alias", ctx.served_model_name},
      {"model_path", engine.model_info().path},
      {"modalities", {{"vision", false}, {"audio", false}, {"video", false}}},
      {"endpoint_slots", true},
      {"endpoint_props", false},
      {"endpoint_metrics", true},
      {"chat_template", ctx.chat_template ? ctx.chat_template->source() : std::string()},
      {"bos_token", piece_or_empty(tok, tok.bos_id())},
      {"eos_token", piece_or_empty(tok, tok.eos_id())},
      {"build_info", "tokenmill " + opts_.version},
      {"is_sleeping", false},
  };
  return reply_json(props);
}

HttpResponse Server::route_slots(HttpRequest&) {
  if (!opts_.slots_endpoint) {
    ApiError e;
    e.status = 501;
    e.type = "not_supported_error";
    e.code = "not_supported";
    e.message = "This server does not support slots endpoint (started with --no-slots).";
    return reply_error(e, "invalid_request");
  }
  ApiError err;
  auto lease = lease_model(json::object(), &err);
  if (!lease.ok()) return reply_error(err, request_failure_reason(err));
  const Engine& engine = *lease->model().engine;
  const int32_t total = engine.config().max_num_seqs;
  const int32_t busy = engine.stats().num_running;
  json slots = json::array();
  for (int32_t i = 0; i < total; ++i)
    slots.push_back({{"id", i},
                     {"id_task", -1},
                     {"n_ctx", lease->model().ctx.max_model_len},
                     {"speculative", !engine.config().speculative.method.empty()},
                     {"is_processing", i < busy}});
  return reply_json(slots);
}

HttpResponse Server::route_slot_action(HttpRequest&) {
  ApiError e;
  e.status = 501;
  e.type = "not_supported_error";
  e.code = "not_supported";
  e.message = "This server does not support slots action: sequences share one paged KV cache with automatic prefix "
              "caching, so there is no per-slot cache to save, restore or erase.";
  return reply_error(e, "invalid_request");
}

HttpResponse Server::route_apply_template(HttpRequest& req) {
  try {
    json body = parse_body(req.body);
    ApiError err;
    auto lease = lease_model(body, &err);
    if (!lease.ok()) throw RequestError{err};
    auto prompt = render_chat_prompt(body, lease->model().ctx, &err);
    if (!prompt.ok()) throw RequestError{err};
    return reply_json(json{{"prompt", *prompt}});
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
}

// llama-server's /infill: the FIM prompt (llama_request.h) as the prompt of a /completion.
HttpResponse Server::route_infill(HttpRequest& req) {
  try {
    json body = parse_body(req.body);
    ApiError err;
    auto lease = lease_model(body, &err);
    if (!lease.ok()) throw RequestError{err};
    const ServerContext& ctx = lease->model().ctx;
    const json* np = body.is_object() ? field(body, "n_predict") : nullptr;
    const int64_t n_predict = np && np->is_number_integer() ? np->get<int64_t>() : 0;
    body["prompt"] = infill_prompt(body, *ctx.tokenizer, ctx.max_model_len, n_predict);
    for (const char* k : {"input_prefix", "input_suffix", "input_extra"}) body.erase(k);
    req.body = body.dump();
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
  return handle_generate(req, ApiKind::Native);
}

// llama-server's /embedding: "content" (or "input") in, a list of {"index", "embedding": [vector]} out.
HttpResponse Server::route_native_embeddings(HttpRequest& req) {
  json body;
  try {
    body = parse_body(req.body);
  } catch (const RequestError& e) {
    return reply_error(e.error, "invalid_request");
  }
  if (body.is_object() && !body.contains("input") && body.contains("content")) {
    body["input"] = body["content"];
    body.erase("content");
    req.body = body.dump();
  }
  HttpResponse res = handle_embed(req, EmbedKind::Embeddings);
  if (res.status != 200) return res;
  const json oai = json::parse(res.body, nullptr, false);
  if (!oai.is_object() || !oai.contains("data")) return res;
  json out = json::array();
  for (const json& d : oai["data"]) out.push_back({{"index", d["index"]}, {"embedding", json::array({d["embedding"]})}});
  res.body = dump_json(out);
  return res;
}

}  // namespace tmill::server
