// serve's --models-file: a YAML file listing the models (name, aliases, file, engine options,
// residency) and the virtual models that route between them (docs/server.md, "The models file").
//
//   memory_limit: 8GiB                 # like --memory-limit (the command line wins)
//   models:
//     - name: small                    # default: the file name without .gguf
//       file: small.gguf               # relative to the models file's folder
//       aliases: [fast]
//       threads: 2                     # engine options, over the command line's
//       kv_cache_memory: 256MiB
//       kv_cache_dtype: f16
//       max_model_len: 2048
//       max_num_seqs: 8
//       pooling: rank                  # --pooling: serve it as an embedding model / reranker
//       chat_template: small.jinja
//       residency: pinned              # or on_demand
//       idle_unload: 5m                # on_demand: unload after this idle time
//   routers:
//     - name: auto
//       default: small                 # a model or a chain [small, big]
//       rules:
//         - {name: long, min_prompt_tokens: 1000, model: [big, small]}
//
// Errors name the file, the line and the key; unknown keys are errors.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "server/model_registry.h"
#include "server/router.h"

namespace tmill::server {

// Engine options a model sets itself (unset: the command line's).
struct EngineOverrides {
  std::optional<int> threads;
  std::optional<std::string> kv_cache_memory;
  std::optional<std::string> kv_cache_dtype;
  std::optional<int32_t> max_model_len;
  std::optional<int32_t> max_num_seqs;
  std::optional<int32_t> max_loras;
  std::optional<std::string> pooling;  // --pooling: mean, cls, last or rank (an embedding model / reranker)
};

struct ModelsFileEntry {
  ModelSpec spec;  // name, aliases, path (resolved against the file's folder), residency, chat_template
  EngineOverrides engine;
};

struct ModelsFile {
  std::optional<std::string> memory_limit;
  std::vector<ModelsFileEntry> models;
  std::vector<RouterSpec> routers;  // not yet prepared (prepare_router)
};

// `source` names the text in errors ("models.yaml"); `base_dir` resolves relative paths.
Result<ModelsFile> parse_models_file(const std::string& text, const std::string& source, const std::string& base_dir);
Result<ModelsFile> load_models_file(const std::string& path);

}  // namespace tmill::server
