// POST /v1/map_reduce (docs/server.md, "Map-reduce over long documents"): a document longer than the
// context, summarized (or answered) hierarchically by map_reduce.h on the named model. Each stage's
// generations are submitted together (one continuous batch; waves of at most kWave requests) through
// Generation, admitted and counted like completions. With "stream": true the response is SSE: one
// "map_reduce.progress" event per finished generation, then the result, then [DONE].
#include <chrono>
#include <condition_variable>

#include <fmt/format.h>

#include "chat/messages.h"
#include "server/generation.h"
#include "server/map_reduce.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

constexpr size_t kWave = 256;

MapReduceOptions options_of(const json& body, const ServerContext& ctx) {
  MapReduceOptions o;
  if (auto s = opt_string(body, "map_prompt")) o.map_prompt = *s;
  if (auto s = opt_string(body, "reduce_prompt")) o.reduce_prompt = *s;
  if (auto v = opt_int(body, "max_tokens", 1, ctx.max_model_len)) o.max_tokens = static_cast<int32_t>(*v);
  else o.max_tokens = std::min(o.max_tokens, std::max(1, ctx.max_model_len / 8));
  if (auto v = opt_int(body, "chunk_tokens", 0, ctx.max_model_len)) o.chunk_tokens = static_cast<int32_t>(*v);
  if (auto v = opt_number(body, "temperature", 0, 2)) o.temperature = static_cast<float>(*v);
  if (auto v = opt_int(body, "seed", 0, INT64_MAX)) o.seed = static_cast<uint64_t>(*v);
  return o;
}

}  // namespace

bool map_reduce_default_chat(const ServerContext& ctx) {
  return ctx.chat_template && !ctx.tokenizer->chat_template().value_or("").empty();
}

PromptBuilder map_reduce_prompt_builder(const ServerContext& ctx, bool chat) {
  if (!chat) return [&ctx](const std::string& text) { return ctx.tokenizer->encode(text, true, false); };
  return [&ctx](const std::string& text) {
    const json msgs = json::array({{{"role", "user"}, {"content", text}}});
    const std::string rendered = detail::render_messages(json::object(), ctx, &msgs);
    return tokenize_chat_prompt(rendered, *ctx.tokenizer, false);
  };
}

HttpResponse Server::route_map_reduce(HttpRequest& req) {
  const auto arrival = Clock::now();
  json body;
  ModelLease lease;
  MapReduceOptions opts;
  std::string document;
  bool chat = false, stream = false;
  try {
    body = parse_body(req.body);
    ApiError err;
    auto leased = lease_model(body, &err);
    if (!leased.ok()) throw RequestError{err};
    lease = std::move(leased).value();
    const ServerContext& ctx = lease.model().ctx;
    auto doc = opt_string(body, "document");
    if (!doc) throw_bad_request("'document' (a string) is required", "document");
    document = std::move(*doc);
    opts = options_of(body, ctx);
    chat = opt_bool(body, "chat").value_or(map_reduce_default_chat(ctx));
    stream = opt_bool(body, "stream").value_or(false);
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
  ServerMetrics* metrics = metrics_for(lease.slot());

  // Everything else runs in `work`: directly for JSON, inside the stream's first next_chunk for SSE.
  struct State {
    ModelLease lease;
    std::string document, model;
    MapReduceOptions opts;
    bool chat = false;
    std::function<bool()> gone;  // the client went away: abort
    bool runner_failed = false;
    std::function<void(int64_t)> count_tokens;  // per-key accounting (Server::handle)
  };
  auto st = std::make_shared<State>();
  st->lease = std::move(lease);
  st->document = std::move(document);
  st->model = st->lease.model().ctx.served_model_name;
  st->opts = opts;
  st->chat = chat;
  st->count_tokens = req.count_tokens;
  auto work = [this, st, metrics, arrival](const MapReduceProgress& progress) -> Result<MapReduceResult> {
    const ServerContext& ctx = st->lease.model().ctx;
    Engine& engine = *st->lease.model().engine;
    BatchRunner run = [&](const std::vector<std::vector<int32_t>>& prompts,
                          const std::function<void(int32_t)>& done) -> Result<std::vector<StageOutput>> {
      std::vector<StageOutput> outs;
      int32_t finished_before = 0;
      for (size_t w = 0; w < prompts.size(); w += kWave) {
        MappedRequest m;
        m.kind = ApiKind::Completion;
        m.model = st->model;
        for (size_t i = w; i < std::min(prompts.size(), w + kWave); ++i) {
          MappedPrompt p;
          p.request.prompt = prompts[i];
          p.request.max_tokens = st->opts.max_tokens;
          p.request.sampling.temperature = st->opts.temperature;
          if (st->opts.seed) p.request.sampling.seed = st->opts.seed + i;
          m.prompts.push_back(std::move(p));
        }
        const auto k = static_cast<int64_t>(m.prompts.size());
        // a stage's wave is admitted whole, even past --max-queued-requests (0 stays unlimited)
        const int64_t limit = opts_.max_queued_requests > 0 ? std::max<int64_t>(opts_.max_queued_requests, k) : 0;
        if (!metrics->try_admit(k, limit)) {
          st->runner_failed = true;
          return Error{"the server's queue is full"};
        }
        Generation gen(engine, metrics, m, arrival);
        int64_t submitted = 0;
        if (Status s = gen.submit(&submitted); !s.ok()) {
          metrics->cancel_admission(k - submitted);
          st->runner_failed = true;
          return Error{s.error()};
        }
        int32_t finished = 0;
        while (!gen.finished()) {
          for (const OutputItem& it : gen.wait(std::chrono::milliseconds(50)))
            if (it.out.finished) done(finished_before + ++finished);
          if (force_stop_.load() || (st->gone && st->gone())) {
            gen.abort();
            st->runner_failed = true;
            return Error{"cancelled"};
          }
        }
        if (gen.error()) {
          st->runner_failed = true;
          return Error{gen.error()->message};
        }
        for (size_t i = 0; i < gen.choices().size(); ++i) {
          StageOutput o;
          o.text = gen.choices()[i].text;
          o.prompt_tokens = static_cast<int32_t>(m.prompts[i].request.prompt.size());
          o.completion_tokens = static_cast<int32_t>(gen.choices()[i].token_ids.size());
          if (st->count_tokens) st->count_tokens(int64_t{o.prompt_tokens} + o.completion_tokens);
          outs.push_back(std::move(o));
        }
        finished_before += static_cast<int32_t>(m.prompts.size());
      }
      return outs;
    };
    return run_map_reduce(st->document, *ctx.tokenizer, ctx.max_model_len, st->opts,
                          map_reduce_prompt_builder(ctx, st->chat), run, progress);
  };
  auto error_of = [st](const std::string& message) {
    ApiError e = bad_request(message, "document");
    if (st->runner_failed) {
      e.status = 500;
      e.type = "server_error";
      e.param.clear();
    }
    return e;
  };

  if (!stream) {
    st->gone = [&req] { return req.disconnected(); };
    auto r = work({});
    if (!r.ok()) return reply_error(error_of(r.error()), st->runner_failed ? "server_error" : "invalid_request", metrics);
    return reply_json(map_reduce_json(*r, st->model));
  }
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.next_chunk = [st, work, error_of](ChunkSink& sink) {
    bool ok = true;
    st->gone = [&ok] { return !ok; };
    auto progress = [&](const StageReport& s, int32_t done, int32_t total) {
      if (!ok) return;
      json ev = {{"object", "map_reduce.progress"}, {"stage", s.stage}, {"level", s.level}, {"done", done}, {"total", total}};
      ok = sink.write(sse_event(ev));
    };
    auto r = work(progress);
    if (!ok) return false;
    const json last = r.ok() ? map_reduce_json(*r, st->model) : error_json(error_of(r.error()));
    if (!sink.write(sse_event(last)) || !sink.write(sse_done())) return false;
    sink.done();
    return true;
  };
  return res;
}

}  // namespace tmill::server
