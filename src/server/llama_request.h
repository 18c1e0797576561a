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
// top_k 40, top_p 0.95, min_p 0.05). n_indent and t_max_predict_ms are stops the server applies
// (native_stop). Samplers this engine does not have (mirostat, DRY, XTC, typical_p, dynatemp,
// top_n_sigma, adaptive) and post_sampling_probs are a 400 naming the field when a request turns
// them on; fields about llama-server's slots and
// cache (id_slot, cache_prompt, n_keep, n_discard, n_cache_reuse, samplers order, min_keep) are
// accepted and have nothing to act on here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace tmill::server {

Result<MappedRequest> map_native_completion_request(const json& body, const ServerContext& ctx,
                                                    ApiError* err = nullptr);

// llama-server's stops on the generated text, applied by the server (Generation) as tokens arrive:
// a line after the first whose indentation (spaces, tabs) is less than n_indent ends the text where
// its indentation ends; once t_max_predict_ms have passed since the first token (ms_since_first_token;
// -1 before it), a text holding a newline ends. nullopt: go on; else the length to cut the text to.
std::optional<size_t> native_stop(const std::string& text, const NativeOptions& o, double ms_since_first_token);

// llama-server's /infill prompt (fill in the middle, for code completion): from the body's
// input_prefix, input_suffix (strings, or ids and strings mixed; special-token text stays text),
// input_extra ([{"filename", "text"}]: other files, for repo-level models) and prompt (what the
// middle starts with), laid out as llama.cpp does with the model's FIM tokens:
//   [BOS] [FIM_REP]myproject\n ([FIM_SEP]filename\n text)... [FIM_SEP]filename\n
//   [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]
// (REP/SEP parts only for models that have those tokens). The prefix keeps its last 3/4 of a batch
// of min(2048, context/2) tokens, the suffix its first 1/4; the extra files fill what the context
// leaves past that batch and 2 * n_predict, keeping their end. Throws RequestError: 501 when the
// model has no FIM tokens, 400 naming a malformed field.
std::vector<int32_t> infill_prompt(const json& body, const Tokenizer& tok, int32_t n_ctx, int64_t n_predict);

// llama-server's sampling defaults for fields a /completion request omits (and --generation-config
// does not set).
inline constexpr float kLlamaTemperature = 0.8f;
inline constexpr int32_t kLlamaTopK = 40;
inline constexpr float kLlamaTopP = 0.95f;
inline constexpr float kLlamaMinP = 0.05f;

}  // namespace tmill::server
