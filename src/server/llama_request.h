// llama-server's native POST /completion (and /completions) request: its body mapped onto the
// /v1/completions mapping (openai_request.h), so both APIs share one set of checks and limits.
//
//   {"prompt": "text" | [ids] | [ids and strings mixed] | [prompts...], "n_predict": 128,
//    "temperature": 0.8, "top_k": 40, "repeat_penalty": 1.1, "n_probs": 5, "stop": ["\n"],
//    "json_schema": {...} | "grammar": "...", "stream": true, "return_tokens": true, ...}
//
// What changes on the way (docs/server.md, "llama-server's API"): n_predict (or max_tokens; -1 or
// absent: the rest of the context, 0: evaluate the prompt only) -> max_tokens; n_probs -> logprobs;
// repeat_penalty -> repetition_penalty (repeat_last_n 0 turns the three penalties off); n_cmpl ->
// n; seed -1 -> a random seed; llama-server's logit_bias forms ([[id or "text", bias or false]],
// {"id" or "text": bias}) -> token ids; sampling fields a request omits take the server's
// --generation-config / command-line values, else llama-server's defaults (temperature 0.8,
// top_k 40, top_p 0.95, min_p 0.05). Samplers this engine does not have (mirostat, DRY, XTC,
// typical_p, dynatemp, top_n_sigma, adaptive), n_indent, t_max_predict_ms and post_sampling_probs
// are a 400 naming the field when a request turns them on; fields about llama-server's slots and
// cache (id_slot, cache_prompt, n_keep, n_discard, n_cache_reuse, samplers order, min_keep) are
// accepted and have nothing to act on here.
#pragma once

#include "server/openai_request.h"

namespace tmill::server {

Result<MappedRequest> map_native_completion_request(const json& body, const ServerContext& ctx,
                                                    ApiError* err = nullptr);

// llama-server's sampling defaults for fields a /completion request omits (and --generation-config
// does not set).
inline constexpr float kLlamaTemperature = 0.8f;
inline constexpr int32_t kLlamaTopK = 40;
inline constexpr float kLlamaTopP = 0.95f;
inline constexpr float kLlamaMinP = 0.05f;

}  // namespace tmill::server
