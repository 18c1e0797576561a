#include "loadgen/runner.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "loadgen/arrivals.h"
#include "loadgen/progress.h"

namespace tmill::loadgen {

using Clock = std::chrono::steady_clock;
using Secs = std::chrono::duration<double>;

double BenchContext::now_s() const { return Secs(Clock::now() - t0).count(); }

double BenchContext::time_left_s() const {
  if (!deadline) return std::numeric_limits<double>::infinity();
  return std::max(0.0, Secs(*deadline - Clock::now()).count());
}

namespace {

// Counting gate with an adjustable limit (0 = unlimited): the --max-concurrency semaphore.
class Gate {
 public:
  void set_limit(int n) {
    std::lock_guard<std::mutex> g(mu_);
    limit_ = n;
    cv_.notify_all();
  }
  // Waits for a free slot, until `until` at the latest; false on timeout.
  bool acquire(std::optional<Clock::time_point> until) {
    std::unique_lock<std::mutex> lk(mu_);
    auto free = [&] { return limit_ <= 0 || in_ < limit_; };
    if (until) {
      if (!cv_.wait_until(lk, *until, free)) return false;
    } else {
      cv_.wait(lk, free);
    }
    ++in_;
    return true;
  }
  void release() {
    std::lock_guard<std::mutex> g(mu_);
    --in_;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int limit_ = 0, in_ = 0;
};

struct Job {
  size_t index = 0;
  const Prompt* prompt = nullptr;
  int phase = 0;
  bool warmup = false;
};

class JobQueue {
 public:
  void push(Job j) {
    std::lock_guard<std::mutex> g(mu_);
    q_.push_back(j);
    cv_.notify_one();
  }
  bool pop(Job* j) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return false;
    *j = q_.front();
    q_.pop_front();
    return true;
  }
  void close() {
    std::lock_guard<std::mutex> g(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> q_;
  bool closed_ = false;
};

std::optional<Clock::time_point> earliest(std::optional<Clock::time_point> a, Clock::time_point b) {
  return a ? std::min(*a, b) : b;
}

}  // namespace

RunResult execute_run(const BenchContext& ctx, const RunPlan& plan) {
  const BenchOptions& o = ctx.opts;
  RunResult out;
  out.label = plan.label;
  out.params = plan.params;
  out.start_s = ctx.now_s();
  if (plan.prompts.empty()) return out;

  const bool timed = !plan.phases.empty();
  const int cap = std::max(1, o.max_workers);
  int workers;
  if (timed) {
    workers = 1;
    for (const auto& p : plan.phases) workers = std::max(workers, p.concurrency > 0 ? p.concurrency : cap);
  } else {
    workers = static_cast<int>(plan.prompts.size());
    if (plan.max_concurrency > 0) workers = std::min(workers, plan.max_concurrency);
  }
  workers = std::clamp(std::max(workers, std::min(plan.warmups, plan.max_concurrency > 0 ? plan.max_concurrency : cap)), 1, cap);

  double planned_s = 0;
  for (const auto& p : plan.phases) planned_s += p.duration_s;
  Progress progress(Progress::pick_mode(o.progress), plan.label,
                    timed ? -1 : static_cast<int64_t>(plan.prompts.size()), planned_s);

  Gate gate;
  JobQueue queue;
  std::mutex results_mu;
  std::vector<RequestResult> results;
  std::atomic<int> in_flight{0}, peak{0};
  Clock::time_point run_start = Clock::now();  // reset after warm-up, before any measured job
  std::mutex warm_mu;
  std::condition_variable warm_cv;
  int warm_left = plan.warmups;

  nlohmann::json schema;
  if (o.structured_fraction > 0)
    schema = nlohmann::json::parse(o.structured_schema.empty() ? default_structured_schema() : o.structured_schema);
  auto worker = [&] {
    OpenAiClient client(ctx.url, ctx.api_key, o.timeout_s);
    Job job;
    while (queue.pop(&job)) {
      const int max_tokens = o.max_tokens > 0 ? o.max_tokens : job.prompt->max_tokens;
      auto body = build_request_body(o.endpoint, ctx.model, *job.prompt, max_tokens, o.ignore_eos);
      if (!job.warmup && structured_request(job.index, o.structured_fraction)) add_json_schema(body, schema);
      if (job.warmup) {
        (void)client.stream(o.endpoint, body);
        gate.release();
        std::lock_guard<std::mutex> g(warm_mu);
        if (--warm_left == 0) warm_cv.notify_all();
        continue;
      }
      int now_in = in_flight.fetch_add(1) + 1;
      for (int p = peak.load(); now_in > p && !peak.compare_exchange_weak(p, now_in);) {
      }
      progress.set_in_flight(now_in);
      const double send_s = Secs(Clock::now() - run_start).count();
      RequestResult r = client.stream(o.endpoint, body);
      progress.set_in_flight(in_flight.fetch_sub(1) - 1);
      if (r.connect_failed && plan.connect_failure_backoff_s > 0)
        std::this_thread::sleep_for(Secs(plan.connect_failure_backoff_s));
      gate.release();
      r.index = job.index;
      r.phase = job.phase;
      r.send_s = send_s;
      if (!r.usage_reported) r.prompt_tokens = job.prompt->approx_tokens;  // estimate, flagged
      progress.on_done(r.success, r.output_tokens);
      std::lock_guard<std::mutex> g(results_mu);
      results.push_back(std::move(r));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) pool.emplace_back(worker);

  if (plan.warmups > 0) {
    gate.set_limit(plan.max_concurrency);
    for (int i = 0; i < plan.warmups; ++i) {
      (void)gate.acquire(std::nullopt);
      queue.push(Job{0, &plan.prompts[0], 0, true});
    }
    std::unique_lock<std::mutex> lk(warm_mu);
    warm_cv.wait(lk, [&] { return warm_left == 0; });
  }

  run_start = Clock::now();
  out.start_s = Secs(run_start - ctx.t0).count();
  progress.start();
  if (!timed) {
    gate.set_limit(plan.max_concurrency);
    auto arrivals = arrival_times(plan.prompts.size(), {plan.rate, plan.burstiness, plan.seed, true});
    for (size_t i = 0; i < plan.prompts.size(); ++i) {
      auto at = run_start + std::chrono::duration_cast<Clock::duration>(Secs(arrivals[i]));
      if (ctx.deadline && at >= *ctx.deadline) {
        out.truncated = true;
        break;
      }
      std::this_thread::sleep_until(at);
      if (!gate.acquire(ctx.deadline)) {
        out.truncated = true;
        break;
      }
      queue.push(Job{i, &plan.prompts[i], 0, false});
    }
  } else {
    size_t k = 0;
    for (size_t pi = 0; pi < plan.phases.size(); ++pi) {
      const Phase& ph = plan.phases[pi];
      const auto start = Clock::now();
      if (ctx.out_of_time()) {
        out.truncated = true;
        break;
      }
      out.phase_starts_s.push_back(Secs(start - run_start).count());
      out.phase_names.push_back(ph.name);
      if (plan.on_phase_start) plan.on_phase_start(pi, out.phase_starts_s.back());
      gate.set_limit(ph.concurrency);
      const auto planned_end = start + std::chrono::duration_cast<Clock::duration>(Secs(ph.duration_s));
      if (ctx.deadline && *ctx.deadline < planned_end) out.truncated = true;
      const auto end = *earliest(ctx.deadline,
                                 start + std::chrono::duration_cast<Clock::duration>(Secs(ph.duration_s)));
      std::mt19937_64 rng(plan.seed + pi);
      auto next = start;
      while (true) {
        next += std::chrono::duration_cast<Clock::duration>(Secs(sample_gap(rng, ph.rate, ph.burstiness)));
        if (next >= end) break;
        std::this_thread::sleep_until(next);
        if (!gate.acquire(end)) break;
        queue.push(Job{k, &plan.prompts[k % plan.prompts.size()], static_cast<int>(pi), false});
        ++k;
        next = std::max(next, Clock::now());
      }
    }
  }
  queue.close();
  for (auto& t : pool) t.join();
  progress.finish();

  std::sort(results.begin(), results.end(),
            [](const RequestResult& a, const RequestResult& b) { return a.send_s < b.send_s; });
  double end_s = 0;
  for (const auto& r : results) end_s = std::max(end_s, r.send_s + r.e2el_s);
  out.duration_s = end_s;
  out.peak_concurrency = peak.load();
  out.requests = std::move(results);
  return out;
}

}  // namespace tmill::loadgen
