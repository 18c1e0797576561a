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
      {"n_indent", m.native.n_indent},
      {"t_max_predict_ms", m.native.t_max_predict_ms},
  };
}

}  // namespace

namespace {

// A string, or ids and strings mixed, tokenized without special tokens (text stays text).
std::vector<int32_t> infill_tokens(const json& v, const Tokenizer& tok, const char* name) {
  return detail::tokenize_mixed(v, tok, /*add_special=*/false, /*parse_special=*/false, [&](const json& e) {
    if (!e.is_number_integer()) throw_bad_request(fmt::format("'{}' must be a string (or token ids and strings)", name), name);
    return static_cast<int32_t>(as_int(e, name, 0, tok.n_vocab() - 1));
  });
}

}  // namespace

std::vector<int32_t> infill_prompt(const json& body, const Tokenizer& tok, int32_t n_ctx, int64_t n_predict) {
  std::string missing;
  if (tok.fim_pre_id() < 0) missing += " prefix token is missing.";
  if (tok.fim_suf_id() < 0) missing += " suffix token is missing.";
  if (tok.fim_mid_id() < 0) missing += " middle token is missing.";
  if (!missing.empty()) {
    ApiError e;
    e.status = 501;
    e.type = "not_supported_error";
    e.code = "not_supported";
    e.message = "Infill is not supported by this model:" + missing;
    throw RequestError{e};
  }
  if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
  const json* pre = field(body, "input_prefix");
  const json* suf = field(body, "input_suffix");
  if (!pre) throw_bad_request("'input_prefix' is required", "input_prefix");
  if (!suf) throw_bad_request("'input_suffix' is required", "input_suffix");
  std::vector<int32_t> prefix = infill_tokens(*pre, tok, "input_prefix");
  std::vector<int32_t> suffix = infill_tokens(*suf, tok, "input_suffix");
  std::vector<int32_t> prompt;
  if (const json* p = field(body, "prompt")) {
    if (!p->is_string()) throw_bad_request("'prompt' must be a string", "prompt");
    prompt = tok.encode(p->get<std::string>(), false, true);
  }
  std::vector<int32_t> extra;
  auto text_ids = [&](const std::string& s) { return tok.encode(s, false, false); };
  auto append = [](std::vector<int32_t>& to, const std::vector<int32_t>& ids) { to.insert(to.end(), ids.begin(), ids.end()); };
  if (tok.fim_rep_id() >= 0) {
    extra.push_back(tok.fim_rep_id());
    append(extra, text_ids("myproject\n"));
  }
  if (const json* ex = field(body, "input_extra")) {
    if (!ex->is_array())
      throw_bad_request("'input_extra' must be an array of {\"filename\": string, \"text\": string}", "input_extra");
    for (const json& chunk : *ex) {
      if (!chunk.is_object() || !chunk.contains("text") || !chunk["text"].is_string())
        throw_bad_request("each 'input_extra' chunk needs a string 'text'", "input_extra");
      if (chunk.contains("filename") && !chunk["filename"].is_string())
        throw_bad_request("an 'input_extra' chunk's 'filename' must be a string", "input_extra");
      if (tok.fim_sep_id() >= 0) {
        extra.push_back(tok.fim_sep_id());
        append(extra, text_ids(chunk.value("filename", "tmp") + "\n"));
      } else {
        append(extra, text_ids("\n\n--- snippet ---\n\n"));
      }
      append(extra, text_ids(chunk["text"].get<std::string>()));
    }
  }
  if (tok.fim_sep_id() >= 0) {
    extra.push_back(tok.fim_sep_id());
    append(extra, text_ids("filename\n"));
  }
  const int64_t n_batch = std::max<int64_t>(8, std::min<int64_t>(2048, n_ctx / 2));
  const int64_t prefix_take = std::min<int64_t>(static_cast<int64_t>(prefix.size()), 3 * (n_batch / 4));
  const int64_t suffix_take = std::min<int64_t>(static_cast<int64_t>(suffix.size()),
                                                std::max<int64_t>(0, n_batch / 4 - (2 + static_cast<int64_t>(prompt.size()))));
  const int64_t extra_take = std::min<int64_t>(std::max<int64_t>(0, n_ctx - n_batch - 2 * std::max<int64_t>(n_predict, 0)),
                                               static_cast<int64_t>(extra.size()));
  std::vector<int32_t> out;
  if (tok.add_bos() && tok.bos_id() >= 0) out.push_back(tok.bos_id());
  out.insert(out.end(), extra.end() - extra_take, extra.end());
  out.push_back(tok.fim_pre_id());
  out.insert(out.end(), prefix.end() - prefix_take, prefix.end());
  append(out, prompt);
  out.push_back(tok.fim_suf_id());
  out.insert(out.end(), suffix.begin(), suffix.begin() + suffix_take);
  out.push_back(tok.fim_mid_id());
  return out;
}

std::optional<size_t> native_stop(const std::string& text, const NativeOptions& o, double ms_since_first_token) {
  const size_t first_nl = text.find('\n');
  if (first_nl == std::string::npos) return std::nullopt;
  if (o.n_indent > 0) {
    for (size_t nl = first_nl; nl != std::string::npos; nl = text.find('\n', nl + 1)) {
      size_t pos = nl + 1;
      int64_t indent = 0;
      while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos, ++indent;
      if (pos < text.size() && text[pos] != '\n' && indent < o.n_indent) return pos;  // a line of code starts too far left
    }
  }
  if (o.t_max_predict_ms > 0 && ms_since_first_token >= static_cast<double>(o.t_max_predict_ms)) return text.size();
  return std::nullopt;
}

Result<MappedRequest> map_native_completion_request(const json& body, const ServerContext& ctx, ApiError* err) {
  return detail::guard_mapping(
      [&]() -> MappedRequest {
        if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
        refuse_unsupported(body);
        json o = body;  // the fields both APIs share (prompt, temperature, top_k, stop, ...) pass as they are
        for (const char* gone : {"n_predict", "max_completion_tokens", "n_probs", "repeat_penalty", "n_cmpl", "echo"})
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
        nat.n_indent = static_cast<int32_t>(opt_int(body, "n_indent", 0, INT32_MAX).value_or(0));
        nat.t_max_predict_ms = opt_int(body, "t_max_predict_ms", -1, INT64_MAX).value_or(0);
        (void)opt_int(body, "t_max_prompt_ms", -1, INT64_MAX);  // llama-server does not apply it either
        (void)opt_bool(body, "cache_prompt");  // type-checked; the prefix cache is always on
        (void)opt_int(body, "id_slot", INT32_MIN, INT32_MAX);
        nat.generation_settings = generation_settings(m, n_predict.value_or(-1), field(body, "grammar"), penalties_on);
        return m;
      },
      err);
}

}  // namespace tmill::server
