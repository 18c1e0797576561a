// llama-server's command line on `tokenmill serve` (docs/server.md, "llama-server's flags"): what
// means the same here is mapped onto tokenmill's options, what tokenmill always does (or where its
// setting is not a thing here) is accepted and said so, the rest is refused naming the reason.
// Unknown flags stay errors. llama-server's two-letter short options (-ngl, -np, -ctk, ...) are spelled
// out by tools/tokenmill.cpp before CLI11 parses them.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "core/result.h"
#include "engine_options.h"
#include "server/server.h"

namespace tmill::cli {

struct LlamaServerCli {
  int64_t ctx_size = -1;               // -c, --ctx-size (-1: not given; 0: the model's)
  int64_t n_gpu_layers = -1;           // -ngl, --n-gpu-layers, --gpu-layers (-1: not given)
  int32_t parallel = -1;               // -np, --parallel (-1: not given)
  std::string cache_type_k, cache_type_v;  // -ctk, -ctv
  std::string flash_attn;              // -fa, --flash-attn [on|off|auto] (a bare -fa: "on")
  bool cont_batching = false, no_cont_batching = false;
  int64_t batch_size = 0, ubatch_size = 0;  // -b, -ub
  int64_t n_predict = -2;              // -n, --n-predict (-2: not given; -1: no cap)
  int32_t keep = -2;                   // --keep (-2: not given)
  std::string alias, chat_template_file, reasoning_format;
  bool jinja = false, metrics = false, no_webui = false, embedding = false, reranking = false;
  bool slots = false, no_slots = false, props = false;  // --slots, --no-slots, --props
  std::string slot_save_path;                           // --slot-save-path
  bool mlock = false, no_mmap = false, verbose = false, cpu_moe = false, no_kv_offload = false;
  int32_t n_cpu_moe = 0, threads_http = 0;  // --threads-http (0 or -1: the default)
  std::vector<std::string> override_tensor;
  std::string split_mode;
  // sampling defaults (NaN / -1: not given), as llama-server's --temp --top-k --top-p --min-p --repeat-penalty
  double temp = -1, top_p = -1, min_p = -1, repeat_penalty = -1;
  int32_t top_k = -1;
};

void add_llama_server_options(CLI::App& app, LlamaServerCli& l);

// Onto the engine and server options (and --served-model-name's list, for --alias); an error names
// the flag and why.
Status apply_llama_server_flags(const LlamaServerCli& l, EngineCli& engine, server::ServerOptions& server,
                                std::vector<std::string>& served_names);

}  // namespace tmill::cli
