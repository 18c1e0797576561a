// Which model serves a generation request: the model (or alias) it names, or, for a virtual model
// (router.h), the chain of the first matching rule, tried in order. A candidate is passed over when
// it cannot be leased in time (unloaded and not loadable: the budget, a load failure, the load
// timeout), when its queue is full, or when the prompt does not fit its context; the last
// candidate's failure is the answer (a chain that runs out answers 429). Counted in /metrics.
#include <chrono>

#include <fmt/format.h>

#include "core/log.h"

#include "server/generation.h"
#include "server/llama_request.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

std::string text_of(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array())
    for (const json& part : content)
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
        out += (out.empty() ? "" : "\n") + part["text"].get<std::string>();
  return out;
}

Result<MappedRequest> map_request(ApiKind kind, const json& body, const ServerContext& ctx, ApiError* err) {
  switch (kind) {
    case ApiKind::Chat: return map_chat_request(body, ctx, err);
    case ApiKind::Native: return map_native_completion_request(body, ctx, err);
    default: return map_completion_request(body, ctx, err);
  }
}

// The facts the rules look at that need no model.
RouteInput route_facts(const json& body, const HttpRequest& req, ApiKind kind, std::string* all_text) {
  RouteInput in;
  const json* tools = field(body, "tools");
  const json* tool_choice = field(body, "tool_choice");
  in.has_tools = tools && tools->is_array() && !tools->empty() &&
                 !(tool_choice && tool_choice->is_string() && *tool_choice == "none");
  if (const json* rf = field(body, "response_format"); rf && rf->is_object()) {
    const std::string type = rf->value("type", "");
    in.has_json_schema = type == "json_schema" || type == "json_object";
  }
  if (const json* so = field(body, "structured_outputs"); so && so->is_object())
    in.has_json_schema |= so->contains("json") || so->contains("json_object");
  in.has_json_schema |= field(body, "guided_json") != nullptr;
  if (kind == ApiKind::Chat) {
    if (const json* msgs = field(body, "messages"); msgs && msgs->is_array())
      for (const json& m : *msgs) {
        if (!m.is_object() || !m.contains("content")) continue;
        const std::string t = text_of(m["content"]);
        *all_text += t + "\n";
        if (m.value("role", "") == "user") in.last_user_message = t;
      }
  } else if (const json* p = field(body, "prompt")) {
    if (p->is_string()) in.last_user_message = p->get<std::string>();
    else if (p->is_array() && !p->empty() && (*p)[0].is_string()) in.last_user_message = (*p)[0].get<std::string>();
    *all_text = in.last_user_message;
  }
  in.header = [&req](const std::string& name) -> std::optional<std::string> {
    if (const std::string* h = req.header(name)) return *h;
    return std::nullopt;
  };
  in.metadata = [&body](const std::string& key) -> std::optional<std::string> {
    const json* md = field(body, "metadata");
    if (!md || !md->is_object() || !md->contains(key)) return std::nullopt;
    const json& v = (*md)[key];
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  return in;
}

}  // namespace

const RouterSpec* Server::find_router(const std::string& name) const {
  for (const RouterSpec& r : opts_.routers)
    if (r.name == name) return &r;
  return nullptr;
}

Result<std::string> Server::classify(const RouterSpec& router, const std::string& message,
                                     const std::function<void(int64_t)>& count_tokens) {
  const RouteClassifier& c = *router.classifier;
  auto slot = models_->resolve(c.model);
  TM_ASSERT(slot, "prepare_router checked the classifier's model");
  TM_ASSIGN_OR_RETURN(ModelLease lease, models_->acquire(slot->slot, opts_.load_timeout_s));
  std::string options;
  for (const auto& x : c.choices) options += (options.empty() ? "" : ", ") + x;
  json body = {{"messages", json::array({{{"role", "system"}, {"content", c.question + " Answer with one of: " + options + "."}},
                                         {{"role", "user"}, {"content", message.substr(0, static_cast<size_t>(c.max_message_chars))}}})},
               {"guided_choice", c.choices},
               {"max_tokens", 64},
               {"temperature", 0}};
  ApiError err;
  auto m = map_chat_request(body, lease.model().ctx, &err);
  if (!m.ok()) return Error{"classifier request: " + err.message};
  ServerMetrics* metrics = metrics_for(lease.slot());
  if (!metrics->try_admit(1, opts_.max_queued_requests)) return Error{"the classifier's queue is full"};
  Generation gen(*lease.model().engine, metrics, *m, Clock::now());
  int64_t submitted = 0;
  if (Status st = gen.submit(&submitted); !st.ok()) {
    metrics->cancel_admission(1 - submitted);
    return Error{"classifier request: " + st.error()};
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!gen.finished() && Clock::now() < deadline) gen.wait(std::chrono::milliseconds(50));
  if (!gen.finished()) return Error{"the classifier did not answer within 60 s"};
  if (gen.error()) return Error{"classifier: " + gen.error()->message};
  if (count_tokens) {  // the classifier's tokens are the request's (per-key tokens per minute)
    const Usage u = gen.usage();
    count_tokens(u.prompt_tokens + u.completion_tokens);
  }
  return gen.choices().at(0).text;
}

std::optional<HttpResponse> Server::select_target(json& body, const HttpRequest& req, ApiKind kind, Target* t) {
  const std::string name = body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
  const RouterSpec* router = find_router(name);
  if (!router) {  // a model by name: its failures are the answer
    ApiError err;
    ResolvedModel resolved;
    auto leased = lease_model(body, &err, &resolved);
    if (!leased.ok()) {
      HttpResponse res =
          reply_error(err, request_failure_reason(err));
      if (err.status == 503) res.set_header("Retry-After", "5");
      return res;
    }
    t->lease = std::move(leased).value();
    t->metrics = metrics_for(t->lease.slot());
    body["model"] = t->lease.model().ctx.served_model_name;  // an alias answers under the model's name
    if (const ModelInfo& info = t->lease.model().engine->model_info(); info.is_embedding())
      return reply_error(bad_request(fmt::format("The model '{}' is an embedding model (pooling {}): it does not generate "
                                                 "text; use /v1/embeddings{}", t->lease.model().ctx.served_model_name,
                                                 info.pooling, info.pooling == "rank" ? " or /v1/rerank" : ""),
                                     "model"),
                         "invalid_request", t->metrics);
    CompressionReport compression;
    if (kind == ApiKind::Chat) {
      auto c = compress_chat(body, t->lease, t->metrics, req.count_tokens, &err);
      if (!c) return reply_error(err, err.status == 400 ? "invalid_request" : "compression_failed", t->metrics);
      compression = *c;
    }
    auto mapped = map_request(kind, body, t->lease.model().ctx, &err);
    if (!mapped.ok())
      return reply_error(err,
                         err.status == 404                           ? "not_found"
                         : err.code == "context_length_exceeded" ? "context_length_exceeded"
                                                                 : "invalid_request",
                         t->metrics);
    t->mapped = std::move(mapped).value();
    t->mapped->include_usage = t->mapped->include_usage || opts_.force_include_usage;
    t->mapped->compression = compression;
    if (Status st = apply_adapter(resolved, t->lease, body, &*t->mapped, &err); !st.ok())
      return reply_error(err, err.status == 400 ? "invalid_request" : "unavailable", t->metrics);
    if (!t->metrics->try_admit(static_cast<int64_t>(t->mapped->prompts.size()), opts_.max_queued_requests)) {
      ApiError e;
      e.status = 429;
      e.message = fmt::format("The server's queue is full ({} requests waiting); retry later.", t->metrics->queued());
      e.type = "rate_limit_error";
      e.code = "queue_full";
      HttpResponse res = reply_error(e, "queue_full", t->metrics);
      res.set_header("Retry-After", "1");
      return res;
    }
    return std::nullopt;
  }

  // A virtual model: the rules pick a chain.
  std::optional<double> keep_alive;
  try {
    keep_alive = keep_alive_of(body);
  } catch (const RequestError& e) {
    return reply_error(e.error, "invalid_request");
  }
  std::string all_text;
  RouteInput in = route_facts(body, req, kind, &all_text);
  in.prompt_tokens = [&]() -> int64_t {
    auto slot = models_->resolve(router->tokenizer_model);
    auto lease = models_->acquire(slot->slot, opts_.load_timeout_s);
    if (!lease.ok()) return 0;
    return static_cast<int64_t>(lease->model().ctx.tokenizer->encode(all_text, false, false).size());
  };
  if (router->classifier) in.classify = [&] { return classify(*router, in.last_user_message, req.count_tokens); };
  const RouteDecision d = route(*router, in);
  t->router = router->name;
  t->rule = d.rule;
  if (d.classifier_error) log_warn("router {}: classifier failed: {}", router->name, *d.classifier_error);
  if (!d.regex_limit_rule.empty())
    log_warn("router {}: rule '{}': last_user_regex hit its match limits (taken as no match)", router->name,
             d.regex_limit_rule);
  auto& reg = metrics_registry_;
  const double timeout = router->load_timeout_s > 0 ? router->load_timeout_s : opts_.load_timeout_s;
  ApiError last;
  const char* last_reason = "queue_full";
  for (size_t i = 0; i < d.chain.size(); ++i) {
    const bool more = i + 1 < d.chain.size();
    auto fallback = [&](const char* reason) {
      if (more)
        reg.counter("tokenmill:router_fallbacks_total",
                    "Requests a router passed from one model of a chain to the next, by reason.",
                    {{"router", router->name}, {"rule", d.rule}, {"from", d.chain[i]}, {"to", d.chain[i + 1]},
                     {"reason", reason}})
            .inc();
    };
    const auto slot = models_->resolve(d.chain[i]);
    ModelRegistry::Failure why{};
    auto leased = models_->acquire(slot->slot, timeout, &why);
    if (!leased.ok()) {
      last = ApiError{};
      last.status = 503;
      last.type = "service_unavailable_error";
      last.code = "model_unavailable";
      last.message = leased.error();
      last_reason = "unavailable";
      fallback("unavailable");
      continue;
    }
    ModelLease lease = std::move(leased).value();
    ServerMetrics* metrics = metrics_for(lease.slot());
    json b = body;
    b["model"] = lease.model().ctx.served_model_name;  // the response names the model that answered
    ApiError err;
    auto mapped = map_request(kind, b, lease.model().ctx, &err);
    if (!mapped.ok()) {
      if (err.code == "context_length_exceeded" && more) {
        fallback("context_length_exceeded");
        continue;
      }
      return reply_error(err, err.code == "context_length_exceeded" ? "context_length_exceeded" : "invalid_request",
                         metrics);
    }
    if (Status st = apply_adapter(*slot, lease, b, &*mapped, &err); !st.ok())
      return reply_error(err, err.status == 400 ? "invalid_request" : "unavailable", metrics);
    if (!metrics->try_admit(static_cast<int64_t>(mapped->prompts.size()), opts_.max_queued_requests)) {
      // Not a failure unless the whole chain is full (router_fallbacks_total counts the pass-over).
      last = ApiError{};
      last.status = 429;
      last.type = "rate_limit_error";
      last.code = "queue_full";
      last.message = fmt::format("The queue of model `{}` is full ({} requests waiting); retry later.", d.chain[i],
                                 metrics->queued());
      last_reason = "queue_full";
      fallback("queue_full");
      continue;
    }
    if (keep_alive) models_->set_keep_alive(lease.slot(), *keep_alive);
    t->lease = std::move(lease);
    t->metrics = metrics;
    t->mapped = std::move(mapped).value();
    t->mapped->include_usage = t->mapped->include_usage || opts_.force_include_usage;
    reg.counter("tokenmill:router_requests_total", "Requests a router sent to a model, by the rule that matched.",
                {{"router", router->name}, {"rule", d.rule}, {"model_name", d.chain[i]}})
        .inc();
    return std::nullopt;
  }
  // The chain ran out: 429 (every model overloaded or unavailable), naming the last reason.
  reg.counter("tokenmill:router_exhausted_total",
              "Requests refused because every model of the chosen chain was overloaded or unavailable.",
              {{"router", router->name}, {"rule", d.rule}})
      .inc();
  ApiError e;
  e.status = 429;
  e.type = "rate_limit_error";
  e.code = last_reason == std::string("queue_full") ? "queue_full" : "model_unavailable";
  e.message = fmt::format("No model of the chain chosen by rule '{}' of `{}` can take the request now ({}); retry later.",
                          d.rule, router->name, last.message);
  // Counted as a failure of the chain's first model (its queue_full or unavailable).
  const auto first = models_->resolve(d.chain[0]);
  HttpResponse res = reply_error(e, last_reason, metrics_for(first->slot));
  res.set_header("Retry-After", "1");
  return res;
}

}  // namespace tmill::server
