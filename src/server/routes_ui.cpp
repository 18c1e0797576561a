// The web pages for people (docs/server.md, "Web pages"): the chat playground at GET /, the live
// dashboard at GET /dashboard, their scripts and style under GET /ui/<file> (embedded at build time
// from src/server/assets/, nothing fetched at run time), and GET /ui/info, the static facts the
// dashboard shows (models, quantization, memory plan, version; behind the API key like the API).
// --no-ui answers 404 on all of them. The pages themselves hold no data: every figure comes from the
// API, /metrics and /ui/info, fetched by the browser.
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "server/embedded_ui.h"
#include "server/openai_response.h"
#include "server/server.h"

namespace tmill::server {

namespace {

// Scripts and styles only from this server; no inline script, no frames: model output that slipped
// into the DOM as HTML could not run a script anyway.
constexpr const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace

HttpResponse Server::route_ui(HttpRequest& req) {
  std::string file;
  if (req.path == "/") file = "chat.html";
  else if (req.path == "/dashboard") file = "dashboard.html";
  else file = req.path.substr(std::strlen("/ui/"));
  const EmbeddedAsset* a = opts_.no_ui ? nullptr : ui_assets::find(file);
  if (!a || file.ends_with(".html") != (req.path == "/" || req.path == "/dashboard")) {
    ApiError e;
    e.status = 404;
    e.message = opts_.no_ui ? fmt::format("Not found: {} {} (the web pages are off: --no-ui)", req.method, req.path)
                            : fmt::format("Not found: {} {}", req.method, req.path);
    e.code = "not_found";
    return reply_error(e, "not_found");
  }
  HttpResponse res;
  res.content_type = std::string(a->content_type);
  res.body = std::string(a->bytes);
  res.set_header("Content-Security-Policy", kCsp);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");  // a new binary's pages at once
  return res;
}

HttpResponse Server::route_ui_info(HttpRequest& req) {
  if (opts_.no_ui) {
    ApiError e;
    e.status = 404;
    e.message = fmt::format("Not found: {} {} (the web pages are off: --no-ui)", req.method, req.path);
    e.code = "not_found";
    return reply_error(e, "not_found");
  }
  // Every configured model: its facts when resident (a lease keeps it so while we read), else its
  // state and configured limits only (asking must not load it).
  json models = json::array();
  for (size_t slot = 0; slot < models_->size(); ++slot) {
    const ModelSpec& spec = models_->spec(slot);
    const ModelRegistry::View v = models_->view(slot);
    json model = {{"id", spec.name}, {"path", spec.path}, {"state", model_state_name(v.state)}};
    if (auto lease = models_->try_lease(slot)) {
      const Engine& engine = *lease->model().engine;
      const ModelInfo& mi = engine.model_info();
      const MemoryPlan& mp = engine.memory_plan();
      model["architecture"] = mi.architecture;
      model["weight_type"] = mi.weight_type;
      model["n_params"] = mi.n_params;
      model["n_layer"] = mi.n_layer;
      model["n_embd"] = mi.n_embd;
      model["n_vocab"] = mi.n_vocab;
      model["n_ctx_train"] = mi.n_ctx_train;
      model["max_model_len"] = engine.max_model_len();
      model["memory_plan"] = {{"weight_bytes", mp.weight_bytes},
                              {"kv_bytes", mp.kv_bytes},
                              {"num_blocks", mp.num_blocks},
                              {"kv_tokens", mp.kv_tokens},
                              {"kv_dtype", mp.kv_dtype},
                              {"max_full_sequences", mp.max_full_sequences},
                              {"note", mp.note},
                              {"device", mp.device},
                              {"device_name", mp.device_name}};
    } else {
      model["max_model_len"] = v.max_model_len > 0 ? json(v.max_model_len) : json(nullptr);
    }
    models.push_back(std::move(model));
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return reply_json(json{{"version", opts_.version},
                         {"started_unix", created_unix_},
                         {"uptime_s", now - created_unix_},
                         {"api_key_required", keys_->enabled()},
                         {"models", std::move(models)}});
}

}  // namespace tmill::server
