// vLLM's --generation-config: the sampling defaults a request gets for the fields it omits.
//   "auto" (default): the model file's recommendations — llama.cpp's general.sampling.* GGUF keys
//                     (ModelInfo::generation_defaults), overlaid by a generation_config.json beside the
//                     file when there is one
//   "vllm":           none (OpenAI's defaults: temperature 1, top_p 1, ...)
//   DIR:              DIR/generation_config.json (a missing or malformed file is an error)
// Of generation_config.json, vLLM's keys are read: temperature, top_p, top_k, min_p,
// repetition_penalty, max_new_tokens (the default max_tokens); other keys are ignored, as in vLLM.
#pragma once

#include <string>

#include "core/result.h"
#include "engine/engine.h"

namespace tmill::server {

Result<GenerationDefaults> load_generation_defaults(const std::string& mode, const std::string& model_path,
                                                    const ModelInfo& info);
// Overlays the vLLM keys of a generation_config.json text onto d (what: the text's name in errors);
// also vLLM's --override-generation-config JSON.
Status overlay_generation_json(const std::string& text, const std::string& what, GenerationDefaults& d);
// "temperature 0.6, top_p 0.95" (for the start-up log); "" when empty.
std::string describe(const GenerationDefaults& d);

}  // namespace tmill::server
