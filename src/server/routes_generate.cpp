// POST /v1/chat/completions and /v1/completions: parse -> map -> admit -> submit, then either wait
// for the whole result (JSON) or stream Server-Sent Events as a chunked response (server/http.h).
// Both paths poll the client's socket while they wait, so a client that goes away aborts its engine
// requests (freeing their KV blocks) within one wait slice.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/log.h"
#include "server/generation.h"
#include "server/llama_response.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "server/tool_response.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

constexpr std::chrono::milliseconds kWaitSlice{50};

// The error of a request past its deadline ("timeout", --max-request-time).
ApiError deadline_error(double seconds) {
  ApiError e;
  e.status = 408;
  e.message = fmt::format("The request took longer than its time limit of {:g} s; its generation was stopped.",
                          seconds);
  e.type = "timeout_error";
  e.code = "request_timeout";
  return e;
}

// Per-key accounting: the request's prompt + completion tokens, once, when `generate` returns
// without handing the generation to a stream (the stream counts them when it is over).
struct TokenCount {
  std::function<void(int64_t)> count;
  const std::unique_ptr<Generation>* gen = nullptr;
  bool armed = false;  // the prompts were submitted
  ~TokenCount() {
    if (!armed || !count || !*gen) return;
    const Usage u = (*gen)->usage();
    count(u.prompt_tokens + u.completion_tokens);
  }
};

struct InflightGuard {
  explicit InflightGuard(std::atomic<int64_t>* c) : c_(c) { c_->fetch_add(1); }
  ~InflightGuard() { c_->fetch_sub(1); }
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;

 private:
  std::atomic<int64_t>* c_;
};

// The state of one SSE response, shared by the response's next_chunk and on_close.
struct StreamState {
  std::unique_ptr<InflightGuard> guard;  // declared first: released last
  ModelLease lease;                      // the model stays resident until the stream is over
  std::unique_ptr<Generation> gen;
  ServerMetrics* metrics = nullptr;
  const std::atomic<bool>* force_stop = nullptr;
  std::shared_ptr<const Tokenizer> tok;
  std::function<bool()> client_gone_check;
  ResponseMeta meta;
  std::vector<OutputItem> backlog;
  std::vector<int64_t> offsets;  // completions logprobs: text_offset per choice
  std::vector<ReasoningStream> reasoning;  // chat with a reasoning split: one per choice
  ToolStreamer tools;            // chat with tools: content / tool_calls deltas
  bool started = false;
  bool error_sent = false;
  std::optional<Clock::time_point> deadline;  // the request's time limit
  std::function<void(int64_t)> count_tokens;  // per-key accounting: called once, when the response is over

  // Past the deadline: the generation is aborted (its KV freed) and the stream ends with an error
  // event, then [DONE].
  bool expire(ChunkSink& sink) {
    gen->abort();
    metrics->on_failure("request_timeout");
    const std::string ev = sse_event(error_json(deadline_error(gen->request().deadline_s)));
    if (!write(sink, ev) || (!native() && !write(sink, sse_done()))) return false;
    sink.done();
    return true;
  }

  bool client_gone() {
    if (!gen->finished()) {
      metrics->on_client_abort();
      gen->abort();
    }
    return false;  // ends the response
  }

  bool write(ChunkSink& sink, const std::string& s) { return sink.write(s); }
  // llama-server's /completion: its own events, no [DONE] (llama_response.h).
  bool native() const { return gen->request().kind == ApiKind::Native; }

  json usage_field(bool* attach) const {
    const MappedRequest& m = gen->request();
    *attach = m.include_usage || m.continuous_usage;
    return m.continuous_usage ? usage_json(gen->usage()) : json(nullptr);
  }

  bool emit(ChunkSink& sink, const OutputItem& it) {
    const RequestOutput& o = it.out;
    const MappedRequest& m = gen->request();
    if (o.finish_reason == FinishReason::Abort) return true;  // we aborted it: nothing to tell
    if (o.finish_reason == FinishReason::Error) {
      if (error_sent || !gen->error()) return true;
      error_sent = true;
      return write(sink, sse_event(error_json(*gen->error())));
    }
    if (native()) {
      const std::string events = native_stream_events(*gen, it, *tok);
      return events.empty() || write(sink, events);
    }
    const int32_t ci = gen->choice_index(it);
    json lp = nullptr;
    if (m.logprobs && !o.token_ids.empty())
      lp = m.kind == ApiKind::Chat ? chat_logprobs_json(*tok, o.token_ids, o.logprobs, m.top_logprobs)
                                   : completion_logprobs_json(*tok, o.token_ids, o.logprobs, m.top_logprobs,
                                                              &offsets[static_cast<size_t>(ci)]);
    json delta = json::object();
    if (m.kind == ApiKind::Chat) {
      // The reasoning first (<think>…</think> into reasoning_content), then tool calls in the answer.
      const std::string content = reasoning.empty() ? o.text
                                                    : reasoning_delta(m, reasoning[static_cast<size_t>(ci)], o.text,
                                                                      o.finished, delta);
      if (tools.active()) delta.update(tools.delta(ci, content, o.finished));  // may hold text back
      else if (!content.empty()) delta["content"] = content;
    }
    const bool nothing = m.kind == ApiKind::Chat ? delta.empty() : o.text.empty();
    if (nothing && lp.is_null() && !o.finished) return true;  // held back (UTF-8, stop strings, markers)
    bool attach = false;
    const json usage = usage_field(&attach);
    const FinishReason finish = o.finished ? o.finish_reason : FinishReason::None;
    json chunk;
    if (m.kind == ApiKind::Chat) {
      chunk = chat_chunk(meta, ci, std::move(delta), std::move(lp), finish, gen->stop_reason(it), attach ? &usage : nullptr);
      if (finish == FinishReason::Stop && tools.called(ci)) chunk["choices"][0]["finish_reason"] = "tool_calls";
    } else {
      chunk = completion_chunk(meta, ci, o.text, std::move(lp), finish, gen->stop_reason(it), attach ? &usage : nullptr);
    }
    return write(sink, sse_event(chunk));
  }

  bool start(ChunkSink& sink) {
    started = true;
    if (native()) return true;
    const MappedRequest& m = gen->request();
    bool attach = false;
    const json usage = usage_field(&attach);
    for (size_t i = 0; i < gen->choices().size(); ++i) {
      const int32_t ci = static_cast<int32_t>(i);
      if (m.kind == ApiKind::Chat) {
        json delta = {{"role", "assistant"}, {"content", ""}};
        if (!write(sink, sse_event(chat_chunk(meta, ci, delta, nullptr, FinishReason::None, nullptr,
                                              attach ? &usage : nullptr))))
          return false;
      } else if (m.echo) {
        const std::string& prompt = m.prompts[i / static_cast<size_t>(m.n)].text;
        if (!write(sink, sse_event(completion_chunk(meta, ci, prompt, nullptr, FinishReason::None, nullptr,
                                                    attach ? &usage : nullptr))))
          return false;
      }
    }
    return true;
  }

  // One call of next_chunk: write what is ready, then wait one slice for more.
  bool pump(ChunkSink& sink) {
    if (!started && !start(sink)) return client_gone();
    for (const OutputItem& it : backlog)
      if (!emit(sink, it)) return client_gone();
    backlog.clear();
    if (gen->finished()) {
      const MappedRequest& m = gen->request();
      if (!native()) {
        if (m.include_usage && !write(sink, sse_event(usage_chunk(meta, gen->usage())))) return client_gone();
        if (!write(sink, sse_done())) return client_gone();
      }
      sink.done();
      return true;
    }
    if (force_stop->load()) {
      gen->abort();
      return false;
    }
    if (deadline && Clock::now() >= *deadline) return expire(sink);
    backlog = gen->wait(kWaitSlice);
    if (client_gone_check && client_gone_check()) return client_gone();
    return true;
  }
};

}  // namespace

// Ollama's keep_alive: how long an on-demand model stays loaded after this request (seconds or a
// duration string; 0: unload when done; negative: keep). 400 naming the field when malformed.
std::optional<double> keep_alive_of(const json& body) {
  const json* ka = field(body, "keep_alive");
  if (!ka) return std::nullopt;
  Result<double> secs = ka->is_number()   ? Result<double>(ka->get<double>())
                        : ka->is_string() ? parse_duration_seconds(ka->get<std::string>())
                                          : Result<double>(Error{"must be a number of seconds or a duration string"});
  if (!secs.ok()) throw_bad_request("'keep_alive': " + secs.error(), "keep_alive");
  // A huge number would overflow the clock's integer duration when the idle deadline is set.
  if (!(*secs <= 1e9)) throw_bad_request("'keep_alive': at most 1e9 seconds (negative: forever)", "keep_alive");
  return *secs;
}

Result<ModelLease> Server::lease_model(const json& body, ApiError* err, ResolvedModel* resolved) {
  try {
    keep_alive_of(body);  // a malformed keep_alive is a 400 before any model loads
    std::string name = opt_string(body, "model").value_or("");
    if (const RouterSpec* router = find_router(name)) name = router->tokenizer_model;  // /tokenize "auto"
    auto r = models_->resolve(name);
    if (!r) {
      detail::check_model(body, ServerContext{});  // throws the 404 model_not_found
      return Error{"unreachable"};
    }
    ModelRegistry::Failure why{};
    auto lease = models_->acquire(r->slot, opts_.load_timeout_s, &why);
    if (!lease.ok()) {
      err->status = 503;
      err->type = "service_unavailable_error";
      err->code = why == ModelRegistry::Failure::Timeout ? "model_loading" : "model_unavailable";
      err->message = lease.error();
      err->param = "model";
      return Error{lease.error()};
    }
    if (auto ka = keep_alive_of(body)) models_->set_keep_alive(r->slot, *ka);
    if (resolved) *resolved = *r;
    return lease;
  } catch (const RequestError& e) {
    *err = e.error;
    return Error{e.error.message};
  }
}

namespace {

// llama-server's per-request adapters: "lora": [{"id": N, "scale": S}, ...], N the position among the
// model's adapters (GET /lora-adapters). Entries at scale 0 are left out; the engine applies one
// adapter per request, so more than one left is refused. nullopt: no `lora` field.
struct RequestLora {
  std::string name;  // empty: the base model (every entry at scale 0, or an empty list)
  float scale = 1.0f;
};
std::optional<RequestLora> request_lora(const json& body, const std::vector<AdapterSpec>& adapters) {
  const json* l = field(body, "lora");
  if (!l) return std::nullopt;
  if (!l->is_array()) throw_bad_request("'lora' must be a list of {\"id\": N, \"scale\": S}", "lora");
  RequestLora out;
  out.scale = 0;
  int picked = 0;
  for (const json& e : *l) {
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer())
      throw_bad_request("each 'lora' entry needs an integer 'id' (GET /lora-adapters lists them)", "lora");
    const int64_t id = e["id"].get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(adapters.size()))
      throw_bad_request(fmt::format("'lora': no adapter with id {} (this model has {})", id, adapters.size()), "lora");
    double scale = 1.0;
    if (e.contains("scale")) {
      if (!e["scale"].is_number() || !std::isfinite(e["scale"].get<double>()) || std::fabs(e["scale"].get<double>()) > 1e4)
        throw_bad_request("'lora': 'scale' must be a number in [-1e4, 1e4]", "lora");
      scale = e["scale"].get<double>();
    }
    if (scale == 0) continue;
    if (++picked > 1 || (!out.name.empty() && out.name != adapters[static_cast<size_t>(id)].name))
      throw_bad_request("'lora': one adapter per request (give the others scale 0)", "lora");
    out.name = adapters[static_cast<size_t>(id)].name;
    out.scale = static_cast<float>(scale);
  }
  if (out.name.empty()) out.scale = 0;
  return out;
}

}  // namespace

Status Server::apply_adapter(const ResolvedModel& resolved, ModelLease& lease, const json& body, MappedRequest* m,
                             ApiError* err) {
  ResolvedModel r = resolved;
  try {
    const std::vector<AdapterSpec> adapters = models_->adapters(lease.slot());
    if (auto l = request_lora(body, adapters)) {
      r.adapter = l->name;
      r.adapter_scale = l->scale;
    } else if (r.adapter.empty()) {  // the base model: llama-server's global adapter, if one is set
      for (const AdapterSpec& a : adapters)
        if (a.global_scale != 0) {
          r.adapter = a.name;
          r.adapter_scale = a.global_scale;
        }
    }
  } catch (const RequestError& e) {
    *err = e.error;
    return Error{e.error.message};
  }
  if (r.adapter.empty()) return {};
  Engine& engine = *lease.model().engine;
  auto has = [&] {
    for (const LoraInfo& l : engine.loras())
      if (l.name == r.adapter) return true;
    return false;
  };
  if (!has()) {  // added at run time while its model was loading: load it now
    for (const AdapterSpec& a : models_->adapters(lease.slot()))
      if (a.name == r.adapter)
        if (auto info = engine.load_lora(a.name, a.path); !info.ok() && !has()) {  // !has: not a racing load
          err->status = 503;
          err->type = "service_unavailable_error";
          err->code = "model_unavailable";
          err->message = fmt::format("LoRA adapter '{}': {}", a.name, info.error());
          err->param = "model";
          return Error{err->message};
        }
  }
  if (r.adapter == resolved.adapter) m->model = r.adapter;  // else the name the request gave
  for (MappedPrompt& p : m->prompts) {
    p.request.lora = r.adapter;
    p.request.lora_scale = r.adapter_scale;
  }
  return {};
}

// A routed request's response says which rule chose its model.
HttpResponse Server::handle_generate(HttpRequest& req, ApiKind kind) {
  Target t;
  HttpResponse res = generate(req, kind, t);
  if (!t.rule.empty()) res.set_header("X-Tokenmill-Route", t.router + "/" + t.rule);
  if (t.mapped && t.mapped->compression.compressed_messages > 0)  // also for streams without usage
    res.set_header("X-Tokenmill-Compressed-Messages", std::to_string(t.mapped->compression.compressed_messages));
  return res;
}

HttpResponse Server::generate(HttpRequest& req, ApiKind kind, Target& t) {
  const auto arrival = Clock::now();
  json body;
  try {
    body = parse_body(req.body);
  } catch (const RequestError& e) {
    return reply_error(e.error, "invalid_request");
  }
  if (auto refused = select_target(body, req, kind, &t)) return std::move(*refused);
  ModelLease lease = std::move(t.lease);
  ServerMetrics* const metrics = t.metrics;
  const ServerContext& ctx = lease.model().ctx;
  Engine& engine = *lease.model().engine;
  const MappedRequest& m = *t.mapped;
  const int64_t k = static_cast<int64_t>(m.prompts.size());
  auto guard = std::make_unique<InflightGuard>(&inflight_);
  auto gen = std::make_unique<Generation>(engine, metrics, m, arrival);
  TokenCount tokens{req.count_tokens, &gen};  // after gen: runs before it is freed
  int64_t submitted = 0;
  if (Status st = gen->submit(&submitted); !st.ok()) {
    metrics->cancel_admission(k - submitted);
    if (!m.prompts.empty() && !m.prompts[0].request.lora.empty() && !models_->resolve(m.model)) {
      ApiError e;  // the adapter was unloaded between resolving its name and submitting
      e.status = 404;
      e.message = fmt::format("The model `{}` does not exist.", m.model);
      e.param = "model";
      e.code = "model_not_found";
      return reply_error(e, "not_found", metrics);
    }
    return reply_error(bad_request(st.error()), "invalid_request", metrics);
  }
  tokens.armed = true;
  if (!m.prompts.empty() && !m.prompts[0].request.lora.empty()) metrics->track_lora(gen->ids(), m.prompts[0].request.lora);

  ResponseMeta meta = make_meta(kind, m.model);
  for (const MappedPrompt& p : m.prompts) meta.prompt_truncated |= p.truncated;

  // Wait for the first output (or the whole result): queue timeouts and errors before any token
  // still get a real HTTP status, and a vanished client is noticed while the request is queued.
  std::vector<OutputItem> first;
  std::optional<Clock::time_point> deadline;
  if (m.deadline_s > 0)
    deadline = arrival + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(m.deadline_s));
  while (!gen->finished() && (!m.stream || !gen->got_output())) {
    if (deadline && Clock::now() >= *deadline) {
      gen->abort();
      return reply_error(deadline_error(m.deadline_s), "request_timeout", metrics);
    }
    auto items = gen->wait(kWaitSlice);
    first.insert(first.end(), std::make_move_iterator(items.begin()), std::make_move_iterator(items.end()));
    if (req.disconnected()) {
      metrics->on_client_abort();
      gen->abort();
      HttpResponse res;
      res.status = 499;  // nginx's "client closed request"; nobody reads it
      res.content_type = "application/json";
      res.body = "{}";
      res.close_connection = true;
      return res;
    }
    if (force_stop_.load()) {
      gen->abort();
      ApiError e;
      e.status = 503;
      e.message = "The server is shutting down.";
      return reply_error(e, "unavailable", metrics);
    }
  }
  if (gen->error() && (!m.stream || gen->finished()))
    return reply_error(*gen->error(), nullptr, metrics);  // counted by Generation

  if (!m.stream) {
    LogprobsSpec lp{m.logprobs, m.top_logprobs};
    if (kind == ApiKind::Native) return reply_json(native_response(*gen, *ctx.tokenizer));
    if (kind == ApiKind::Chat) {
      std::vector<ChoiceOutput> choices = gen->choices();
      split_reasoning_choices(m, choices);  // first: tool calls are parsed from the answer only
      apply_tool_calls(m.tools, choices);
      return reply_json(chat_response(meta, choices, gen->usage(), *ctx.tokenizer, lp));
    } else {
      std::vector<std::string> echo;
      if (m.echo)
        for (size_t i = 0; i < gen->choices().size(); ++i) echo.push_back(m.prompts[i / static_cast<size_t>(m.n)].text);
      return reply_json(completion_response(meta, gen->choices(), gen->usage(), *ctx.tokenizer, lp, echo));
    }
  }

  auto st = std::make_shared<StreamState>();
  st->guard = std::move(guard);
  st->lease = std::move(lease);
  st->metrics = metrics;
  st->force_stop = &force_stop_;
  st->tok = ctx.tokenizer;
  st->client_gone_check = req.client_gone;
  st->deadline = deadline;
  st->count_tokens = req.count_tokens;
  st->meta = meta;
  st->backlog = std::move(first);
  st->offsets.assign(gen->choices().size(), 0);
  if (kind == ApiKind::Chat) {
    st->reasoning = reasoning_streams(m, gen->choices().size());
    st->tools = ToolStreamer(m.tools, gen->choices().size());
  }
  if (m.echo)
    for (size_t i = 0; i < st->offsets.size(); ++i)
      st->offsets[i] = static_cast<int64_t>(utf8_length(m.prompts[i / static_cast<size_t>(m.n)].text));
  st->gen = std::move(gen);
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.next_chunk = [st](ChunkSink& sink) { return st->pump(sink); };
  res.on_close = [st] {
    // The response is over (sent, failed or cut): whatever is unfinished is aborted now.
    if (!st->gen->finished()) st->gen->abort();
    if (st->count_tokens) {
      const Usage u = st->gen->usage();
      st->count_tokens(u.prompt_tokens + u.completion_tokens);
    }
  };
  return res;
}

}  // namespace tmill::server
