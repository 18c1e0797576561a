#include "server/llama_request.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include <fmt/format.h>

#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

// A number field turned "on": a 400 naming it, since this engine has no such sampler.
void refuse_if(const json& body, const char* name, const char* what, bool (*on)(double), const char* off) {
  const json* v = field(body, name);
  if (!v) return;
  if (!v->is_number() && !v->is_boolean())
    throw_bad_request(fmt::format("'{}' must be a number", name), name);
  const double x = v->is_boolean() ? (v->get<bool>() ? 1.0 : 0.0) : v->get<double>();
  if (on(x))
    throw_bad_request(fmt::format("'{}' ({}) is not supported by this server; leave it out or set it to {}", name,
                                  what, off),
                      name);
}

void refuse_unsupported(const json& body) {
  refuse_if(body, "mirostat", "Mirostat sampling", [](double x) { return x != 0; }, "0");
  refuse_if(body, "dry_multiplier", "DRY repetition penalty", [](double x) { return x > 0; }, "0");
  refuse_if(body, "dynatemp_range", "dynamic temperature", [](double x) { return x > 0; }, "0");
  refuse_if(body, "typical_p", "locally typical sampling", [](double x) { return x < 1; }, "1");
  refuse_if(body, "top_n_sigma", "top-n-sigma sampling", [](double x) { return x > 0; }, "-1");
  refuse_if(body, "adaptive_target", "adaptive sampling", [](double x) { return x >= 0; }, "-1");
  refuse_if(body, "n_indent", "minimum indentation", [](double x) { return x > 0; }, "0");
  refuse_if(body, "t_max_predict_ms", "a time limit on generation; use 'timeout' (seconds)",
            [](double x) { return x > 0; }, "0");
  refuse_if(body, "post_sampling_probs", "probabilities after the sampling chain; n_probs gives the model's",
            [](double x) { return x != 0; }, "false");
  // XTC is off at probability 0 or at a threshold above 0.5 (llama.cpp's rule).
  if (const json* p = field(body, "xtc_probability"); p && p->is_number() && p->get<double>() > 0) {
    const json* t = field(body, "xtc_threshold");
    const double threshold = t && t->is_number() ? t->get<double>() : 0.1;
    if (threshold <= 0.5)
      throw_bad_request("'xtc_probability' (XTC sampling) is not supported by this server; leave it out or set it to 0",
                        "xtc_probability");
  }
}

// llama-server's logit_bias forms -> OpenAI's {"<id>": bias}. A text key biases each of its tokens;
// false bans (-100, the engine's floor).
json openai_logit_bias(const json& lb, const Tokenizer& tok) {
  json out = json::object();
  auto add = [&](const json& key, const json& bias) {
    double b = 0;
    if (bias.is_boolean()) {
      if (bias.get<bool>()) throw_bad_request("a logit_bias of true means nothing: give a number or false", "logit_bias");
      b = -100;
    } else if (bias.is_number()) {
      b = bias.get<double>();
    } else {
      throw_bad_request("logit_bias values must be numbers or false", "logit_bias");
    }
    std::vector<int32_t> ids;
    if (key.is_number_integer()) {
      ids.push_back(static_cast<int32_t>(as_int(key, "logit_bias", 0, INT32_MAX)));
    } else if (key.is_string()) {
      const std::string& s = key.get_ref<const std::string&>();
      const bool digits = !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) {
                            return c >= '0' && c <= '9';
                          });
      if (digits) ids.push_back(static_cast<int32_t>(std::min<long long>(std::stoll(s), INT32_MAX)));
      else ids = tok.encode(s, /*add_special=*/false, /*parse_special=*/true);
    } else {
      throw_bad_request("logit_bias keys must be token ids or text", "logit_bias");
    }
    for (int32_t id : ids) out[std::to_string(id)] = b;
  };
  if (lb.is_array()) {
    for (const json& e : lb) {
      if (!e.is_array() || e.size() != 2)
        throw_bad_request("each logit_bias entry must be [token id or text, bias or false]", "logit_bias");
      add(e[0], e[1]);
    }
  } else if (lb.is_object()) {
    for (auto it = lb.begin(); it != lb.end(); ++it) add(json(it.key()), it.value());
  } else {
    throw_bad_request("'logit_bias' must be an array of [token, bias] or an object", "logit_bias");
  }
  return out;
}

// The result's generation_settings: what this request was generated with, under llama-server's
// names (the samplers this engine lacks at their "off" values).
json generation_settings(const MappedRequest& m, int64_t n_predict, const json* grammar, bool penalties_on) {
  const GenerateRequest& r = m.prompts.front().request;
  const SamplingParams& sp = r.sampling;
  json bias = json::array();
  for (const auto& [id, b] : sp.logit_bias) bias.push_back(json::array({id, b}));
  return json{
      {"n_predict", n_predict},
      {"max_tokens", n_predict},
      {"seed", sp.seed ? json(*sp.seed) : json(-1)},
      {"temperature", sp.temperature},
      {"dynatemp_range", 0.0},
      {"top_k", sp.top_k},
      {"top_p", sp.top_p},
      {"min_p", sp.min_p},
      {"top_n_sigma", -1.0},
      {"xtc_probability", 0.0},
      {"typical_p", 1.0},
      {"repeat_last_n", penalties_on ? -1 : 0},  // the penalties count the whole sequence
      {"repeat_penalty", sp.repetition_penalty},
      {"presence_penalty", sp.presence_penalty},
      {"frequency_penalty", sp.frequency_penalty},
      {"dry_multiplier", 0.0},
      {"mirostat", 0},
      {"adaptive_target", -1.0},
      {"adaptive_decay", 0.9},
      {"stop", r.stop},
      {"ignore_eos", r.ignore_eos},
      {"stream", m.stream},
      {"logit_bias", std::move(bias)},
      {"n_probs", m.logprobs ? m.top_logprobs : 0},
      {"grammar", grammar && grammar->is_string() ? grammar->get<std::string>() : std::string()},
      {"samplers", json::array({"penalties", "temperature", "min_p", "top_k", "top_p"})},  // this engine's order
      {"timings_per_token", m.native.timings_per_token},
  };
}

}  // namespace

Result<MappedRequest> map_native_completion_request(const json& body, const ServerContext& ctx, ApiError* err) {
  return detail::guard_mapping(
      [&]() -> MappedRequest {
        if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
        refuse_unsupported(body);
        json o = body;  // the fields both APIs share (prompt, temperature, top_k, stop, ...) pass as they are
        for (const char* gone : {"n_predict", "max_completion_tokens", "n_probs", "repeat_penalty", "n_cmpl", "echo",
                                 "suffix"})
          o.erase(gone);
        // n_predict wins over its aliases max_tokens and max_completion_tokens.
        std::optional<int64_t> n_predict = opt_int(body, "n_predict", -1, INT32_MAX);
        if (!n_predict) n_predict = opt_int(body, "max_completion_tokens", -1, INT32_MAX);
        if (!n_predict) n_predict = opt_int(body, "max_tokens", -1, INT32_MAX);
        o.erase("max_tokens");
        const bool prompt_only = n_predict && *n_predict == 0;
        if (n_predict && *n_predict > 0) o["max_tokens"] = *n_predict;
        if (prompt_only) o["max_tokens"] = 1;  // one token is generated and not returned
        // n_probs (alias logprobs): the top-N alternatives of every token.
        std::optional<int64_t> n_probs = opt_int(body, "n_probs", 0, ctx.max_logprobs);
        if (!n_probs) n_probs = opt_int(body, "logprobs", 0, ctx.max_logprobs);
        o.erase("logprobs");
        if (n_probs && *n_probs > 0) o["logprobs"] = *n_probs;
        if (auto n = opt_int(body, "n_cmpl", 1, INT32_MAX); n && !field(body, "n")) o["n"] = *n;
        // seed -1 (and its uint32 spelling) asks for a random one.
        if (auto seed = opt_int(body, "seed", INT64_MIN, INT64_MAX); seed && (*seed == -1 || *seed == UINT32_MAX))
          o.erase("seed");
        // repeat_last_n 0: llama.cpp's three penalties are off; otherwise they count the whole sequence.
        const bool penalties_on = opt_int(body, "repeat_last_n", -1, INT32_MAX).value_or(-1) != 0;
        if (!penalties_on) {
          o.erase("presence_penalty");
          o.erase("frequency_penalty");
          o.erase("repetition_penalty");
        } else if (auto rp = opt_float(body, "repeat_penalty"); rp && !field(body, "repetition_penalty")) {
          o["repetition_penalty"] = *rp;
        }
        if (const json* lb = field(body, "logit_bias")) o["logit_bias"] = openai_logit_bias(*lb, *ctx.tokenizer);
        // llama-server's defaults where neither the request nor the server's configuration says.
        const GenerationDefaults& d = ctx.defaults;
        if (!field(body, "temperature") && !d.temperature) o["temperature"] = kLlamaTemperature;
        if (!field(body, "top_k") && !d.top_k) o["top_k"] = kLlamaTopK;
        if (!field(body, "top_p") && !d.top_p) o["top_p"] = kLlamaTopP;
        if (!field(body, "min_p") && !d.min_p) o["min_p"] = kLlamaMinP;

        MappedRequest m = detail::map_completions(o, ctx, ApiKind::Native);
        NativeOptions& nat = m.native;
        nat.prompt_only = prompt_only;
        nat.return_tokens = opt_bool(body, "return_tokens").value_or(false);
        nat.timings_per_token = opt_bool(body, "timings_per_token").value_or(false);
        if (const json* rf = field(body, "response_fields")) {
          if (!rf->is_array()) throw_bad_request("'response_fields' must be an array of field names", "response_fields");
          for (const json& f : *rf) {
            if (!f.is_string()) throw_bad_request("'response_fields' must be an array of field names", "response_fields");
            nat.response_fields.push_back(f.get<std::string>());
          }
        }
        (void)opt_bool(body, "cache_prompt");  // type-checked; the prefix cache is always on
        (void)opt_int(body, "id_slot", INT32_MIN, INT32_MAX);
        nat.generation_settings = generation_settings(m, n_predict.value_or(-1), field(body, "grammar"), penalties_on);
        return m;
      },
      err);
}

}  // namespace tmill::server
