// Everything `tokenmill bench serve` can be told; filled by the CLI (tools/commands/bench_serve.cpp)
// or directly by tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "loadgen/client.h"
#include "loadgen/stats.h"

namespace tmill::loadgen {

enum class DatasetKind { Random, SharedPrefix, Jsonl };
const char* dataset_name(DatasetKind k);

struct BenchOptions {
  // Server.
  std::string base_url;
  std::string api_key;  // empty: $OPENAI_API_KEY if set
  std::string model;    // empty: first id of GET /v1/models
  Endpoint endpoint = Endpoint::Chat;

  // Load.
  int num_prompts = 100;
  int max_concurrency = 0;  // 0: unlimited (bounded by max_workers)
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  int num_warmups = 0;
  double timeout_s = 600;
  // Before anything else, wait up to this long for GET /health (or /v1/models) to answer 200: a
  // server that is still loading its model answers 503 (vLLM's --ready-check-timeout-sec; 0 = no wait).
  double ready_check_timeout_s = 0;
  int max_tokens = 0;     // 0: each prompt's own output length
  int max_workers = 512;  // HTTP worker threads (= most concurrent streams)
  // Structured output: this fraction of the requests (spread evenly) carries response_format
  // json_schema with `structured_schema` (JSON text; empty: default_structured_schema()).
  double structured_fraction = 0;
  std::string structured_schema;

  // Dataset.
  DatasetKind dataset = DatasetKind::Random;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;
  int prefix_len = 1024;
  int num_prefixes = 4;
  std::string dataset_path;

  // Measurement and output.
  SloConfig goodput;
  bool progress = true;
  double metrics_interval_s = 1.0;  // <= 0: no /metrics scraping
  std::string json_path, report_path;
  bool print_summary = true;

  // Scenarios.
  std::string scenario;  // empty: a single run with the options above
  std::vector<int> concurrency_levels = {1, 2, 4, 8, 16, 32, 64};
  double slo_ttft_ms = 2000;
  int context_len = 0;  // 0: ask the server, else 2048
  double time_budget_s = 0;  // 0: unlimited
  bool short_mode = false;
  // recovery: a shell command that kills and restarts the server, run in the middle of the load
  // (restart mode: time until it serves again, requests lost; docs/bench-serve.md).
  std::string restart_command;

  // Option names ("num-prompts", ...) the user gave explicitly: scenario presets do not override them.
  std::set<std::string> explicit_opts;
  bool is_set(const std::string& name) const { return explicit_opts.count(name) != 0; }
};

}  // namespace tmill::loadgen
