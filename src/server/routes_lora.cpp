// LoRA adapters at run time, vLLM's routes (behind the API key like the admin routes):
//   POST /v1/load_lora_adapter   {"lora_name": N, "lora_path": FILE[, "base_model_name": M][, "lora_scale": S]}
//   POST /v1/unload_lora_adapter {"lora_name": N}
// Both answer 200 with a plain-text sentence (as vLLM does); errors are OpenAI error bodies: 400 for
// a bad request or an adapter the model refuses, 404 for an unknown adapter or base model.
// An adapter is registered with its base model (ModelRegistry::add_adapter) and, when that model is
// resident, loaded into its engine at once; an unloaded model loads it with its weights (and drops it
// with a warning if it does not load then, e.g. past --max-loras).
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/log.h"
#include "server/request_fields.h"
#include "server/server.h"

namespace tmill::server {

namespace {

HttpResponse text_ok(const std::string& text) {
  HttpResponse res;
  res.content_type = "text/plain; charset=utf-8";
  res.body = text;
  return res;
}

ApiError lora_error(int status, const std::string& message, const char* param) {
  ApiError e;
  e.status = status;
  e.message = message;
  e.param = param;
  if (status == 404) e.code = "model_not_found";
  return e;
}

}  // namespace

HttpResponse Server::route_load_lora(HttpRequest& req) {
  std::string name, path, base;
  float scale = 1.0f;
  try {
    const json body = parse_body(req.body);
    if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
    name = opt_string(body, "lora_name").value_or("");
    path = opt_string(body, "lora_path").value_or("");
    base = opt_string(body, "base_model_name").value_or("");
    if (auto s = opt_float(body, "lora_scale")) scale = *s;
  } catch (const RequestError& e) {
    return reply_error(e.error, "invalid_request");
  }
  if (name.empty() || path.empty())
    return reply_error(lora_error(400, "Both 'lora_name' and 'lora_path' must be provided.", name.empty() ? "lora_name" : "lora_path"),
                       "invalid_request");
  if (!std::isfinite(scale)) return reply_error(lora_error(400, "'lora_scale' must be finite", "lora_scale"), "invalid_request");
  size_t slot = 0;
  if (!base.empty()) {
    auto r = models_->resolve(base);
    if (!r || !r->adapter.empty())
      return reply_error(lora_error(404, fmt::format("The model `{}` does not exist.", base), "base_model_name"),
                         "not_found");
    slot = r->slot;
  }
  if (find_router(name))
    return reply_error(lora_error(400, fmt::format("The name '{}' is a router's; choose another 'lora_name'.", name),
                                  "lora_name"),
                       "invalid_request");
  if (auto existing = models_->resolve(name); existing)
    return reply_error(lora_error(400,
                                  existing->adapter.empty()
                                      ? fmt::format("The name '{}' is a model's; choose another 'lora_name'.", name)
                                      : fmt::format("The lora adapter '{}' has already been loaded.", name),
                                  "lora_name"),
                       "invalid_request");
  // Resident: the engine reads and checks the file now; its error is the client's answer.
  if (auto lease = models_->try_lease(slot); lease && lease->model().engine) {
    auto info = lease->model().engine->load_lora(name, path);
    if (!info.ok()) return reply_error(lora_error(400, info.error(), "lora_path"), "invalid_request");
    if (Status st = models_->add_adapter(slot, AdapterSpec{name, path, scale, ""}); !st.ok()) {
      (void)lease->model().engine->unload_lora(name);
      return reply_error(lora_error(400, st.error(), "lora_name"), "invalid_request");
    }
    metrics_for(slot)->enable_lora();
  } else {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      return reply_error(lora_error(400, fmt::format("cannot read the LoRA adapter file {}", path), "lora_path"),
                         "invalid_request");
    if (Status st = models_->add_adapter(slot, AdapterSpec{name, path, scale, ""}); !st.ok())
      return reply_error(lora_error(400, st.error(), "lora_name"), "invalid_request");
  }
  log_info("LoRA adapter '{}' loaded from {} on model {}", name, path, models_->spec(slot).name);
  return text_ok(fmt::format("Success: LoRA adapter '{}' added successfully.", name));
}

HttpResponse Server::route_unload_lora(HttpRequest& req) {
  std::string name;
  try {
    const json body = parse_body(req.body);
    if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
    name = opt_string(body, "lora_name").value_or("");
  } catch (const RequestError& e) {
    return reply_error(e.error, "invalid_request");
  }
  if (name.empty()) return reply_error(lora_error(400, "'lora_name' must be provided.", "lora_name"), "invalid_request");
  auto slot = models_->remove_adapter(name);
  if (!slot)
    return reply_error(lora_error(404, fmt::format("The lora adapter '{}' cannot be found.", name), "lora_name"),
                       "not_found");
  // Requests already running keep it until they finish (the engine holds it per request).
  if (auto lease = models_->try_lease(*slot); lease && lease->model().engine)
    (void)lease->model().engine->unload_lora(name);
  log_info("LoRA adapter '{}' unloaded", name);
  return text_ok(fmt::format("Success: LoRA adapter '{}' removed successfully.", name));
}

// An adapter as /v1/models lists it (vLLM's shape): root is its file, parent its base model.
json Server::adapter_json(const ModelRegistry::AdapterEntry& a) const {
  const ModelRegistry::View v = models_->view(a.slot);
  json m;
  m["id"] = a.spec.name;
  m["object"] = "model";
  m["created"] = created_unix_;
  m["owned_by"] = "tokenmill";
  m["root"] = a.spec.path;
  m["parent"] = models_->spec(a.slot).name;
  m["max_model_len"] = v.max_model_len > 0 ? json(v.max_model_len) : json(nullptr);
  m["state"] = model_state_name(v.state);
  m["lora_scale"] = a.spec.scale;
  return m;
}

// GET: llama-server's list, per base model. POST [{"id", "scale"[, "model"]}, ...] (llama-server's):
// the global scales -- the adapter applied to the base model's requests that name none; adapters left
// out get 0; one adapter per model may be non-zero (the engine applies one per request).
HttpResponse Server::route_lora_adapters(HttpRequest& req) {
  if (req.method == "POST") {
    try {
      if (!req.api_key_admin) {
        ApiError e;
        e.status = 403;
        e.code = "permission_denied";
        e.message = "POST /lora-adapters changes every request's adapter: it needs an admin API key";
        throw RequestError{e};
      }
      const json body = parse_json_value(req.body);
      if (!body.is_array()) throw_bad_request("the body must be a list of {\"id\": N, \"scale\": S}");
      std::map<size_t, std::vector<std::pair<size_t, float>>> per_model;
      for (size_t s = 0; s < models_->size(); ++s) per_model[s];  // (every model's scales reset)
      for (const json& e : body) {
        if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() || e["id"].get<int64_t>() < 0)
          throw_bad_request("each entry needs a non-negative integer 'id' (GET /lora-adapters lists them)", "id");
        double scale = 1.0;
        if (e.contains("scale")) {
          if (!e["scale"].is_number() || !std::isfinite(e["scale"].get<double>()) || std::fabs(e["scale"].get<double>()) > 1e4)
            throw_bad_request("'scale' must be a number in [-1e4, 1e4]", "scale");
          scale = e["scale"].get<double>();
        }
        size_t slot = 0;
        if (e.contains("model")) {
          const auto r = e["model"].is_string() ? models_->resolve(e["model"].get<std::string>()) : std::nullopt;
          if (!r || !r->adapter.empty()) throw_bad_request(fmt::format("'model': no base model {}", e["model"].dump()), "model");
          slot = r->slot;
        }
        if (scale != 0) per_model[slot].emplace_back(static_cast<size_t>(e["id"].get<int64_t>()), static_cast<float>(scale));
      }
      for (const auto& [slot, scales] : per_model)
        if (scales.size() > 1)
          throw_bad_request(fmt::format("model '{}': one adapter at a non-zero scale (the engine applies one per "
                                        "request; give the others scale 0)",
                                        models_->spec(slot).name));
      for (const auto& [slot, scales] : per_model)  // ids first, then set: nothing changes on an error
        for (const auto& [i, scale] : scales)
          if (i >= models_->adapters(slot).size())
            throw_bad_request(fmt::format("no adapter with id {} (model '{}' has {})", i, models_->spec(slot).name,
                                          models_->adapters(slot).size()),
                              "id");
      for (const auto& [slot, scales] : per_model)  // (an adapter unloaded meanwhile: its id is gone)
        if (Status st = models_->set_global_scales(slot, scales); !st.ok()) throw_bad_request(st.error(), "id");
    } catch (const RequestError& e) {
      return reply_error(e.error, request_failure_reason(e.error));
    }
    return reply_json(json{{"success", true}});
  }
  json out = json::array();
  std::vector<int64_t> next(models_->size(), 0);  // ids count per base model
  for (const ModelRegistry::AdapterEntry& a : models_->all_adapters())
    out.push_back({{"id", next[a.slot]++},
                   {"path", a.spec.path},
                   {"scale", a.spec.scale},
                   {"global_scale", a.spec.global_scale},
                   {"name", a.spec.name},
                   {"model", models_->spec(a.slot).name}});
  HttpResponse res;
  res.content_type = "application/json";
  res.body = out.dump();
  return res;
}

}  // namespace tmill::server
