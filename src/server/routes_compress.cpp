// History compression on the leased model (history_compression.h): the summary is one greedy chat
// request of its own on the same engine, admitted and counted like any other, before the request's
// prompt is mapped.
#include <chrono>

#include <fmt/format.h>

#include "server/generation.h"
#include "server/server.h"

namespace tmill::server {

std::optional<CompressionReport> Server::compress_chat(json& body, ModelLease& lease, ServerMetrics* metrics,
                                                       const std::function<void(int64_t)>& count_tokens,
                                                       ApiError* err) {
  const ServerContext& ctx = lease.model().ctx;
  Engine& engine = *lease.model().engine;
  const CompressionOptions& opts = opts_.compression;
  Summarizer summarize = [&](const SummaryJob& job) -> Result<SummaryResult> {
    json req = {{"messages", json::array({{{"role", "system"}, {"content", job.instruction}},
                                          {{"role", "user"}, {"content", job.transcript}}})},
                {"max_tokens", opts.summary_max_tokens},
                {"temperature", 0}};
    ApiError e;
    auto m = map_chat_request(req, ctx, &e);
    if (!m.ok()) return Error{"the summary request: " + e.message};
    if (!metrics->try_admit(1, opts_.max_queued_requests)) return Error{"the queue is full"};
    Generation gen(engine, metrics, *m, Clock::now());
    int64_t submitted = 0;
    if (Status st = gen.submit(&submitted); !st.ok()) {
      metrics->cancel_admission(1 - submitted);
      return Error{st.error()};
    }
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (!gen.finished() && Clock::now() < deadline && !force_stop_.load()) gen.wait(std::chrono::milliseconds(50));
    if (!gen.finished()) return Error{"the summary did not finish in time"};
    if (gen.error()) return Error{gen.error()->message};
    const Usage u = gen.usage();
    if (count_tokens) count_tokens(u.prompt_tokens + u.completion_tokens);  // the summary is the request's work
    return SummaryResult{gen.choices().at(0).text, static_cast<int32_t>(u.prompt_tokens),
                         static_cast<int32_t>(u.completion_tokens)};
  };
  try {
    // Summaries are per model: the salt is the served name's hash.
    auto rep = compress_history(body, ctx, opts, summaries_, std::hash<std::string>{}(ctx.served_model_name), summarize);
    if (!rep.ok()) {
      err->status = 500;
      err->type = "server_error";
      err->code = "compression_failed";
      err->message = rep.error();
      return std::nullopt;
    }
    return *rep;
  } catch (const RequestError& e) {
    *err = e.error;
    return std::nullopt;
  }
}

}  // namespace tmill::server
