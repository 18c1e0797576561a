// serve's models: the command line's `--model [NAME=]FILE` (repeatable) and the models file
// (`--models-file`, server/models_file.h) turned into the server's ModelSpecs plus one engine
// configuration per model; the CPU thread policy; --memory-limit.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "engine_options.h"
#include "server/model_registry.h"
#include "server/models_file.h"

namespace tmill::cli {

struct ServeModel {
  server::ModelSpec spec;
  EngineCli engine;  // the command line's engine options with the model's own on top
};

// `[NAME=]FILE` entries (the positional MODEL first). NAME defaults to the file name without .gguf.
// A text whose part before '=' has no '/' and that is not itself an existing file is NAME=FILE.
Result<std::vector<ServeModel>> models_from_cli(const std::vector<std::string>& entries, const EngineCli& base);
// The models file's entries over the command line's engine options.
Result<std::vector<ServeModel>> models_from_file(const server::ModelsFile& file, const EngineCli& base);

// No oversubscription by default: models whose threads are not set share the cores evenly
// (cores / number of models, at least 1). Explicit threads are kept; a warning says when the total
// exceeds the cores.
void apply_thread_policy(std::vector<ServeModel>& models, bool threads_given);

// "24GiB", "512MiB", bytes, or "80%" of MemTotal; "0" or "none": no limit.
Result<uint64_t> parse_memory_limit(const std::string& s);
// Default with several models: 90 % of MemTotal.
uint64_t default_memory_limit();

// Fills each spec's file_bytes, kv_bytes (when the KV size is explicit) and max_model_len.
Status size_models(std::vector<ServeModel>& models);

}  // namespace tmill::cli
