// Ollama's API (ollama.h): POST /api/chat and /api/generate run the chat route (or, for raw prompts,
// llama-server's /completion) and rewrite its stream into Ollama's NDJSON; GET /api/tags, /api/ps,
// /api/version and POST /api/show describe the models; POST /api/embed and /api/embeddings are
// /v1/embeddings in Ollama's shapes. Errors are Ollama's {"error": "message"}.
#include <memory>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "server/chat_adapter.h"
#include "server/ollama.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

// "494.03M", "7.62B": Ollama's parameter_size.
std::string parameter_size(int64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f}B", static_cast<double>(n) / 1e9);
  return fmt::format("{:.2f}M", static_cast<double>(n) / 1e6);
}

}  // namespace

HttpResponse Server::handle_ollama(HttpRequest& req, OllamaKind kind) {
  const auto arrival = Clock::now();
  json body, oai;
  bool completions = false;
  try {
    body = parse_body(req.body);
    oai = ollama_to_openai(kind, body, &completions);
  } catch (const RequestError& e) {
    metrics_->on_failure("invalid_request");
    return reply_json(ollama_error(e.error.message), e.error.status);
  }
  if (ollama_load_only(kind, body)) {  // Ollama's way to load a model: nothing generated
    ApiError err;
    auto lease = lease_model(oai, &err);
    if (!lease.ok()) return reply_json(ollama_error(err.message), err.status);
    json j = {{"model", lease->model().ctx.served_model_name}, {"created_at", ollama_time(std::chrono::system_clock::now())}};
    if (kind == OllamaKind::Chat) j["message"] = {{"role", "assistant"}, {"content", ""}};
    else j["response"] = "";
    j["done"] = true;
    j["done_reason"] = "load";
    return reply_json(j);
  }
  const bool stream = body.value("stream", true);
  req.body = oai.dump();
  auto tr = std::make_shared<OllamaStream>(kind, stream, body.value("model", ""), arrival);
  ChatAdapter a;
  a.result = [](const json& c) { return c; };  // (the route always streams here)
  a.error = [](int, const json& e) { return ollama_error(chat_error(500, e).message); };
  a.chunk = [tr](const json& c) { return tr->chunk(c, Clock::now()); };
  a.stream_error = [tr](const json& e) { return tr->error(e); };
  HttpResponse res = adapt_chat_response(handle_generate(req, completions ? ApiKind::Native : ApiKind::Chat), std::move(a));
  if (res.next_chunk) res.content_type = stream ? "application/x-ndjson" : "application/json";
  return res;
}

HttpResponse Server::route_ollama_tags(HttpRequest&) {
  json models = json::array();
  for (size_t i = 0; i < models_->size(); ++i) {
    const json m = model_json(i);
    models.push_back({{"name", m["id"]},
                      {"model", m["id"]},
                      {"modified_at", ollama_time(std::chrono::system_clock::from_time_t(created_unix_))},
                      {"size", m["memory_bytes"]},
                      {"digest", ""},
                      {"details", {{"format", "gguf"}, {"state", m["state"]}}}});
  }
  return reply_json(json{{"models", std::move(models)}});
}

HttpResponse Server::route_ollama_ps(HttpRequest&) {
  json models = json::array();
  for (size_t i = 0; i < models_->size(); ++i) {
    const json m = model_json(i);
    if (m["state"] != "loaded") continue;
    models.push_back({{"name", m["id"]},
                      {"model", m["id"]},
                      {"size", m["memory_bytes"]},
                      {"size_vram", 0},
                      {"digest", ""},
                      {"details", {{"format", "gguf"}}}});
  }
  return reply_json(json{{"models", std::move(models)}});
}

HttpResponse Server::route_ollama_version(HttpRequest&) { return reply_json(json{{"version", opts_.version}}); }

HttpResponse Server::route_ollama_show(HttpRequest& req) {
  json body;
  try {
    body = parse_body(req.body);
  } catch (const RequestError& e) {
    return reply_json(ollama_error(e.error.message), e.error.status);
  }
  if (body.is_object() && !body.contains("model") && body.contains("name")) body["model"] = body["name"];  // older clients
  if (body.is_object() && body.contains("model") && body["model"].is_string())
    body["model"] = ollama_model_name(body["model"].get<std::string>());
  ApiError err;
  auto lease = lease_model(body, &err);
  if (!lease.ok()) return reply_json(ollama_error(err.message), err.status);
  const ServerContext& ctx = lease->model().ctx;
  const ModelInfo& info = lease->model().engine->model_info();
  const Tokenizer& tok = *ctx.tokenizer;
  json caps = json::array({"completion"});
  if (ctx.chat_template && ctx.chat_template->source().find("tools") != std::string::npos) caps.push_back("tools");
  if (tok.fim_pre_id() >= 0 && tok.fim_suf_id() >= 0 && tok.fim_mid_id() >= 0) caps.push_back("insert");
  if (info.is_embedding()) caps = json::array({"embedding"});
  return reply_json(json{
      {"modelfile", ""},
      {"parameters", ""},
      {"template", ctx.chat_template ? ctx.chat_template->source() : std::string()},
      {"details",
       {{"format", "gguf"},
        {"family", info.architecture},
        {"families", json::array({info.architecture})},
        {"parameter_size", parameter_size(info.n_params)},
        {"quantization_level", info.weight_type}}},
      {"model_info",
       {{"general.architecture", info.architecture},
        {"general.parameter_count", info.n_params},
        {info.architecture + ".context_length", ctx.max_model_len},
        {info.architecture + ".embedding_length", info.n_embd},
        {info.architecture + ".block_count", info.n_layer}}},
      {"capabilities", std::move(caps)},
  });
}

// /api/embed {"model", "input": text | [texts]} -> {"model", "embeddings": [[...]]};
// /api/embeddings (the older one) {"model", "prompt"} -> {"embedding": [...]}.
HttpResponse Server::route_ollama_embed(HttpRequest& req) {
  json body;
  try {
    body = parse_body(req.body);
  } catch (const RequestError& e) {
    return reply_json(ollama_error(e.error.message), e.error.status);
  }
  const bool legacy = req.path == "/api/embeddings";
  if (body.is_object() && legacy) {
    body["input"] = body.value("prompt", json(""));
    body.erase("prompt");
  }
  if (body.is_object()) body.erase("truncate");  // inputs longer than the context are a 400 here
  if (body.is_object() && body.contains("model") && body["model"].is_string())
    body["model"] = ollama_model_name(body["model"].get<std::string>());
  req.body = body.dump();
  const auto arrival = Clock::now();
  HttpResponse res = handle_embed(req, EmbedKind::Embeddings);
  const json j = json::parse(res.body, nullptr, false);
  if (res.status != 200) return reply_json(ollama_error(chat_error(res.status, j).message), res.status);
  json vectors = json::array();
  for (const json& d : j["data"]) vectors.push_back(d["embedding"]);
  if (legacy) return reply_json(json{{"embedding", vectors.empty() ? json::array() : vectors[0]}});
  return reply_json(json{{"model", j.value("model", "")},
                         {"embeddings", std::move(vectors)},
                         {"total_duration", std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - arrival).count()},
                         {"load_duration", 0},
                         {"prompt_eval_count", j["usage"].value("prompt_tokens", 0)}});
}

}  // namespace tmill::server
