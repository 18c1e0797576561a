#include "server/generation.h"

#include <algorithm>

#include <fmt/format.h>

#include "server/llama_request.h"
#include "server/server_metrics.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

struct Generation::Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<OutputItem> items;
  // Engine thread only (per prompt): for TTFT / end-to-end metrics at the moment outputs happen.
  ServerMetrics* metrics = nullptr;
  Clock::time_point arrival;
  std::vector<char> first_token_seen;
  std::vector<int32_t> unfinished;

  void push(size_t prompt, const RequestOutput& o) {
    const auto now = Clock::now();
    if (metrics) {
      if (!o.token_ids.empty() && !first_token_seen[prompt]) {
        first_token_seen[prompt] = 1;
        metrics->on_first_token(std::chrono::duration<double>(now - arrival).count(), o.prompt_tokens);
      }
      if (o.finished && --unfinished[prompt] == 0 && o.finish_reason != FinishReason::Error)
        metrics->on_request_end(std::chrono::duration<double>(now - arrival).count());
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      items.push_back(OutputItem{prompt, o, now});
    }
    cv.notify_one();
  }
};

Generation::Generation(Engine& engine, ServerMetrics* metrics, const MappedRequest& request, Clock::time_point arrival)
    : engine_(engine), metrics_(metrics), req_(request), chan_(std::make_shared<Channel>()) {
  const size_t np = req_.prompts.size();
  chan_->metrics = metrics;
  chan_->arrival = arrival;
  chan_->first_token_seen.assign(np, 0);
  chan_->unfinished.assign(np, req_.n);
  choices_.resize(np * static_cast<size_t>(req_.n));
  for (size_t i = 0; i < choices_.size(); ++i) choices_[i].index = static_cast<int32_t>(i);
  completion_tokens_.assign(choices_.size(), 0);
  cached_tokens_.assign(np, 0);
  timings_.resize(choices_.size());
  cut_.assign(choices_.size(), 0);
}

Clock::time_point Generation::arrival() const { return chan_->arrival; }

Generation::~Generation() {
  if (!finished()) abort();
}

Status Generation::submit(int64_t* submitted) {
  *submitted = 0;
  for (size_t p = 0; p < req_.prompts.size(); ++p) {
    std::shared_ptr<Channel> chan = chan_;
    auto id = engine_.submit(req_.prompts[p].request, [chan, p](const RequestOutput& o) { chan->push(p, o); });
    if (!id.ok()) {
      abort();
      return Error{id.error()};
    }
    ids_.push_back(*id);
    unfinished_ += static_cast<size_t>(req_.n);
    ++*submitted;
  }
  return {};
}

void Generation::abort() {
  if (aborted_) return;
  aborted_ = true;
  for (uint64_t id : ids_) engine_.abort(id);
}

std::vector<OutputItem> Generation::wait(std::chrono::milliseconds timeout) {
  std::vector<OutputItem> got;
  {
    std::unique_lock<std::mutex> lock(chan_->mu);
    chan_->cv.wait_for(lock, timeout, [&] { return !chan_->items.empty(); });
    got.assign(std::make_move_iterator(chan_->items.begin()), std::make_move_iterator(chan_->items.end()));
    chan_->items.clear();
  }
  std::vector<OutputItem> kept;
  kept.reserve(got.size());
  for (OutputItem& it : got) {
    RequestOutput& o = it.out;
    got_output_ = true;
    if (cut_[static_cast<size_t>(choice_index(it))]) continue;  // ended by a native stop: the rest is not its
    ChoiceOutput& c = choices_[static_cast<size_t>(choice_index(it))];
    c.text += o.text;
    c.token_ids.insert(c.token_ids.end(), o.token_ids.begin(), o.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    completion_tokens_[static_cast<size_t>(choice_index(it))] = o.completion_tokens;
    cached_tokens_[it.prompt] = o.cached_prompt_tokens;
    ChoiceTiming& t = timings_[static_cast<size_t>(choice_index(it))];
    if (!t.started && !o.token_ids.empty()) {
      t.started = true;
      t.first_token = it.at;
    }
    t.last = it.at;
    if (!o.finished && req_.kind == ApiKind::Native) apply_native_stop(it, c, t);
    kept.push_back(it);
    if (!o.finished) continue;
    c.finish = o.finish_reason;
    c.stop_reason = stop_reason(it);
    if (unfinished_ > 0) unfinished_--;
    if (o.finish_reason == FinishReason::Error && !error_) {
      ApiError e;
      if (o.stop_reason == "timeout") {
        e.status = 503;
        e.message = fmt::format("The request waited in the queue longer than the server's request timeout ({} s)",
                                req_.prompts[it.prompt].request.queue_timeout_s);
        e.code = "queue_timeout";
        if (metrics_) metrics_->on_failure("queue_timeout");
      } else {
        e.status = 500;
        e.message = "Engine error: " + o.stop_reason;
        e.code = "engine_error";
        if (metrics_) metrics_->on_failure("engine_error");
      }
      error_ = e;
      abort();  // the other prompts' results are useless now
    }
  }
  return kept;
}

void Generation::apply_native_stop(OutputItem& it, ChoiceOutput& c, const ChoiceTiming& t) {
  const NativeOptions& nat = req_.native;
  if (nat.n_indent <= 0 && nat.t_max_predict_ms <= 0) return;
  const double ms = t.started ? std::chrono::duration<double, std::milli>(it.at - t.first_token).count() : -1.0;
  const auto cut = native_stop(c.text, nat, ms);
  if (!cut) return;
  RequestOutput& o = it.out;
  const size_t before = c.text.size() - o.text.size();  // where this output's text began
  if (*cut < c.text.size()) {
    c.text.resize(*cut);
    o.text.resize(*cut > before ? *cut - before : 0);
  }
  o.finished = true;  // the choice ends here, as if at its token limit (llama-server's stop_type "limit")
  o.finish_reason = FinishReason::Length;
  cut_[static_cast<size_t>(choice_index(it))] = 1;
  engine_.abort(ids_[it.prompt]);
}

Usage Generation::usage() const {
  Usage u;
  for (const MappedPrompt& p : req_.prompts) {
    u.prompt_tokens += static_cast<int64_t>(p.request.prompt.size());
    u.dropped_messages += p.dropped_messages;
    u.dropped_tokens += p.dropped_tokens;
  }
  for (int32_t c : completion_tokens_) u.completion_tokens += c;
  for (int32_t c : cached_tokens_) u.cached_tokens += c;
  u.compression = req_.compression;
  return u;
}

json Generation::stop_reason(const OutputItem& it) const {
  const RequestOutput& o = it.out;
  if (o.finish_reason != FinishReason::Stop) return nullptr;
  const GenerateRequest& r = req_.prompts[it.prompt].request;
  if (!o.token_ids.empty()) {
    const int32_t last = o.token_ids.back();
    if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), last) != r.stop_token_ids.end()) return last;
    if (!r.ignore_eos && engine_.tokenizer()->is_eog(last)) return nullptr;  // end of sequence
  }
  if (std::find(r.stop.begin(), r.stop.end(), o.stop_reason) != r.stop.end()) return o.stop_reason;
  return nullptr;
}

}  // namespace tmill::server
