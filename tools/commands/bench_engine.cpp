// tokenmill bench engine: prompt and generation throughput per batch size on one GGUF file, measured
// like llama.cpp's llama-batched-bench (B sequences, each a prompt of P tokens then G generated).
//   prompt phase: from submission until every sequence has its first token  -> B*P / t
//   generation:   the remaining G-1 decode steps of every sequence          -> B*(G-1) / t
// Like llama-bench and llama-batched-bench, one untimed warm-up run comes first (the largest batch, its
// own prompts): the timed runs then find the KV cache's pages mapped and the threads started, as in a
// server that has been running, instead of paying the kernel's first-touch page faults (llama.cpp clears
// its KV buffer when it creates it, so its timed runs never pay them either). --no-warmup skips it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/strings.h"
#include "engine_options.h"
#include "tokenizer/tokenizer.h"

namespace {
using Clock = std::chrono::steady_clock;

struct BenchCli {
  tmill::cli::EngineCli engine;
  std::string batches = "1,4,16,32";
  int32_t prompt_len = 128, gen_len = 128, repetitions = 1;
  uint64_t seed = 1;
  bool json_out = false;
  bool no_warmup = false;
  std::vector<tmill::cli::CliLora> loras;  // --lora: request b uses loras[b % size]
};

struct Run {
  double prompt_tps = 0, gen_tps = 0, prompt_s = 0, gen_s = 0;
  double kv_waste = 0;      // at the step with the most allocated KV slots: (allocated - used) / allocated
  double kv_waste_mean = 0; // over all steps: sum(allocated - used) / sum(allocated) (lockstep sequences
                            // all open a new block at the same step, so the peak is the worst instant)
  int64_t kv_peak_slots = 0;
  double drafts = 0, draft_tokens = 0, accepted_tokens = 0;  // speculative decoding, this run
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Submits the requests and steps the engine until they are done; outputs[b] gets request b's tokens.
struct Pass {
  Clock::time_point t_first{}, t_done{};
  double sum_alloc = 0, sum_unused = 0;
  double kv_waste = 0;
  int64_t kv_peak_slots = 0;
  std::vector<std::vector<int32_t>> outputs;
};

bool run_pass(tmill::Engine& e, const std::vector<tmill::GenerateRequest>& reqs, Pass& p) {
  using namespace tmill;
  const auto batch = static_cast<int32_t>(reqs.size());
  int32_t have_first = 0, done = 0;
  p.outputs.assign(reqs.size(), {});
  for (size_t b = 0; b < reqs.size(); ++b) {
    auto id = e.submit(reqs[b], [&, b](const RequestOutput& out) {
      auto& toks = p.outputs[b];
      if (!out.token_ids.empty() && toks.empty()) {
        if (++have_first == batch) p.t_first = Clock::now();
      }
      toks.insert(toks.end(), out.token_ids.begin(), out.token_ids.end());
      if (out.finished && ++done == batch) p.t_done = Clock::now();
    });
    if (!id.ok()) {
      log_error("bench request rejected: {}", id.error());
      return false;
    }
  }
  // step by hand to watch the KV cache at its fullest
  while (e.step() || !e.idle()) {
    const KvCacheStats kv = e.stats().kv;
    p.sum_alloc += static_cast<double>(kv.allocated_slots);
    p.sum_unused += static_cast<double>(kv.allocated_slots - kv.used_slots);
    if (kv.allocated_slots > p.kv_peak_slots) {
      p.kv_peak_slots = kv.allocated_slots;
      p.kv_waste = kv.allocated_slots ? double(kv.allocated_slots - kv.used_slots) / kv.allocated_slots : 0;
    }
  }
  return true;
}

Run run_once(tmill::Engine& e, int32_t batch, const BenchCli& o, uint64_t seed) {
  using namespace tmill;
  const int32_t n_vocab = e.model_info().n_vocab;
  std::mt19937_64 rng(seed);
  auto tok = e.tokenizer();
  std::vector<GenerateRequest> reqs;
  for (int32_t b = 0; b < batch; ++b) {
    GenerateRequest r;
    // random tokens that are not control tokens, so every prompt is distinct (no prefix-cache hits)
    while (static_cast<int32_t>(r.prompt.size()) < o.prompt_len) {
      const auto t = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
      if (!tok->is_control(t) && t < tok->n_vocab()) r.prompt.push_back(t);
    }
    r.max_tokens = o.gen_len;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.skip_special_tokens = true;
    if (!o.loras.empty()) {
      const auto& l = o.loras[static_cast<size_t>(b) % o.loras.size()];
      r.lora = l.name;
      r.lora_scale = l.scale;
    }
    reqs.push_back(std::move(r));
  }
  if (e.config().speculative.method == "replay") {
    // The test proposer replays the known greedy continuation: compute it first, untimed.
    for (auto& r : reqs) r.speculative = false;
    Pass ref;
    if (!run_pass(e, reqs, ref)) return {};
    for (size_t b = 0; b < reqs.size(); ++b) {
      reqs[b].speculative = true;
      reqs[b].debug_replay_tokens = ref.outputs[b];
    }
    // (with prefix caching the timed pass's prompts hit the cache: its prompt tok/s is not comparable)
  }
  const EngineStats before = e.stats();
  Pass p;
  const auto t0 = Clock::now();
  if (!run_pass(e, reqs, p)) return {};
  const EngineStats after = e.stats();
  Run r;
  r.kv_peak_slots = p.kv_peak_slots;
  r.kv_waste = p.kv_waste;
  r.kv_waste_mean = p.sum_alloc > 0 ? p.sum_unused / p.sum_alloc : 0;
  r.prompt_s = std::chrono::duration<double>(p.t_first - t0).count();
  r.gen_s = std::chrono::duration<double>(p.t_done - p.t_first).count();
  r.prompt_tps = batch * static_cast<double>(o.prompt_len) / r.prompt_s;
  r.gen_tps = o.gen_len > 1 ? batch * static_cast<double>(o.gen_len - 1) / r.gen_s : 0;
  r.draft_tokens = static_cast<double>(after.spec_num_draft_tokens - before.spec_num_draft_tokens);
  r.accepted_tokens = static_cast<double>(after.spec_num_accepted_tokens - before.spec_num_accepted_tokens);
  r.drafts = static_cast<double>(after.spec_num_drafts - before.spec_num_drafts);
  return r;
}

int run(BenchCli& o) {
  using namespace tmill;
  std::vector<int32_t> batches;
  for (auto& s : split(o.batches, ',')) {
    try {
      batches.push_back(std::stoi(s));
    } catch (...) {
      log_error("--batch: '{}' is not a number", s);
      return 2;
    }
    if (batches.back() < 1) {
      log_error("--batch sizes must be >= 1");
      return 2;
    }
  }
  const int32_t max_b = *std::max_element(batches.begin(), batches.end());
  auto loras = cli::lora_flags(o.engine);
  if (!loras.ok()) {
    log_error("{}", loras.error());
    return 2;
  }
  o.loras = *loras;
  cli::EngineCli ec = o.engine;
  ec.max_num_seqs = std::max(ec.max_num_seqs, max_b);
  if (ec.max_model_len == 0) ec.max_model_len = o.prompt_len + o.gen_len;
  // room for every sequence of the largest batch, plus two blocks each of slack
  if (ec.kv_cache_memory.empty()) ec.kv_cache_tokens = static_cast<int64_t>(max_b) * (ec.max_model_len + 2 * ec.block_size);
  auto eng = cli::create_engine(ec);
  if (!eng.ok()) {
    log_error("{}", eng.error());
    return 1;
  }
  Engine& e = **eng;
  nlohmann::json out = nlohmann::json::array();
  const bool spec = e.config().speculative.enabled();
  if (!o.json_out) {
    std::printf("| %5s | %6s | %6s | %12s | %12s | %10s | %10s | %12s | %13s |", "batch", "prompt", "gen",
                "prompt tok/s", "gen tok/s", "prompt s", "gen s", "KV waste peak", "KV waste mean");
    if (spec) std::printf(" %8s | %10s |", "accept", "tok/verify");
    std::printf("\n");
  }
  const int32_t reps = std::max(1, o.repetitions);
  ProgressBar bar("bench", batches.size() * static_cast<uint64_t>(reps) + (o.no_warmup ? 0 : 1), "runs");
  uint64_t runs_done = 0;
  if (!o.no_warmup) {  // prompts of their own (another seed): the timed runs get no prefix-cache hits from it
    run_once(e, max_b, o, o.seed ^ 0x5741524d5550ull);
    bar.update(++runs_done, "warm-up");
  }
  for (int32_t b : batches) {
    std::vector<double> p, g, ps, gs, waste, waste_mean;
    double drafts = 0, draft_tokens = 0, accepted = 0;
    for (int32_t rep = 0; rep < reps; ++rep) {
      Run r = run_once(e, b, o, o.seed + static_cast<uint64_t>(rep) * 1000 + static_cast<uint64_t>(b));
      bar.update(++runs_done, fmt::format("batch {}", b));
      p.push_back(r.prompt_tps);
      g.push_back(r.gen_tps);
      ps.push_back(r.prompt_s);
      gs.push_back(r.gen_s);
      waste.push_back(r.kv_waste);
      waste_mean.push_back(r.kv_waste_mean);
      drafts += r.drafts;
      draft_tokens += r.draft_tokens;
      accepted += r.accepted_tokens;
    }
    const double mp = median(p), mg = median(g);
    // vLLM's acceptance rate: accepted draft tokens / draft tokens; and tokens per verified draft
    // (accepted + the verifier's own token)
    const double rate = draft_tokens > 0 ? accepted / draft_tokens : 0;
    const double per_verify = drafts > 0 ? (accepted + drafts) / drafts : 0;
    nlohmann::json row = {{"batch", b}, {"prompt_tokens_per_s", mp}, {"gen_tokens_per_s", mg},
                          {"kv_waste_at_peak", median(waste)}, {"kv_waste_mean", median(waste_mean)}};
    if (spec) {
      row["spec_acceptance_rate"] = rate;
      row["spec_draft_tokens"] = draft_tokens;
      row["spec_accepted_tokens"] = accepted;
      row["spec_tokens_per_verification"] = per_verify;
    }
    out.push_back(row);
    bar.clear();
    if (!o.json_out) {
      std::printf("| %5d | %6d | %6d | %12.1f | %12.1f | %10.3f | %10.3f | %12.2f%% | %12.2f%% |", b, o.prompt_len,
                  o.gen_len, mp, mg, median(ps), median(gs), 100 * median(waste), 100 * median(waste_mean));
      if (spec) std::printf(" %7.1f%% | %10.2f |", 100 * rate, per_verify);
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  if (o.json_out) std::printf("%s\n", out.dump().c_str());
  return 0;
}

TM_COMMAND("bench engine", "prompt and generation throughput per batch size (like llama-batched-bench)",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<BenchCli>();
             tmill::cli::add_engine_options(app, o->engine);
             tmill::cli::add_lora_options(app, o->engine);  // requests take the adapters in turn
             app.add_option("--batch", o->batches, "comma-separated batch sizes")->capture_default_str();
             app.add_option("--prompt-len", o->prompt_len, "prompt tokens per sequence")->capture_default_str();
             app.add_option("--gen-len", o->gen_len, "generated tokens per sequence")->capture_default_str();
             app.add_option("--repetitions", o->repetitions, "runs per batch size (median reported)")->capture_default_str();
             app.add_option("--seed", o->seed, "seed for the random prompts")->capture_default_str();
             app.add_flag("--no-warmup", o->no_warmup,
                          "skip the untimed warm-up run of the largest batch (llama-bench's --no-warmup)");
             app.add_flag("--json", o->json_out, "print [{\"batch\",\"prompt_tokens_per_s\",\"gen_tokens_per_s\"}]");
             return [o] { return run(*o); };
           });
}  // namespace
