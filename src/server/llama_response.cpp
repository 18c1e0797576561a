#include "server/llama_response.h"

#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

json native_timings_json(const NativeTimings& t) {
  auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
  auto per_second = [](double ms, int64_t n) { return ms > 0 ? 1e3 * static_cast<double>(n) / ms : 0.0; };
  return json{
      {"cache_n", t.cache_n},
      {"prompt_n", t.prompt_n},
      {"prompt_ms", t.prompt_ms},
      {"prompt_per_token_ms", per_token(t.prompt_ms, t.prompt_n)},
      {"prompt_per_second", per_second(t.prompt_ms, t.prompt_n)},
      {"predicted_n", t.predicted_n},
      {"predicted_ms", t.predicted_ms},
      {"predicted_per_token_ms", per_token(t.predicted_ms, t.predicted_n)},
      {"predicted_per_second", per_second(t.predicted_ms, t.predicted_n)},
  };
}

const char* native_stop_type(FinishReason finish, const json& stop_reason) {
  switch (finish) {
    case FinishReason::Stop: return stop_reason.is_string() ? "word" : "eos";
    case FinishReason::Length: return "limit";
    default: return "none";
  }
}

json native_probs_json(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::vector<SampleResult>& lps,
                       int32_t top_n) {
  json out = json::array();
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    const std::string t = token_string(tok, ids[i]);
    json top = json::array();
    for (size_t k = 0; k < lps[i].top.size() && static_cast<int32_t>(k) < top_n; ++k) {
      const std::string tt = token_string(tok, lps[i].top[k].token);
      top.push_back({{"id", lps[i].top[k].token},
                     {"token", tt},
                     {"bytes", bytes_json(tt)},
                     {"logprob", finite_logprob(lps[i].top[k].logprob)}});
    }
    out.push_back({{"id", ids[i]},
                   {"token", t},
                   {"bytes", bytes_json(t)},
                   {"logprob", finite_logprob(lps[i].logprob)},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

json native_final_json(const NativeResult& r, const NativeOptions& opts) {
  json res = {
      {"index", r.index},
      {"content", r.content},
      {"tokens", opts.return_tokens ? json(r.tokens) : json::array()},
      {"id_slot", -1},  // no fixed slots here: any request may run beside any other
      {"stop", true},
      {"model", r.model},
      {"tokens_predicted", r.tokens_predicted},
      {"tokens_evaluated", r.tokens_evaluated},
      {"generation_settings", opts.generation_settings},
      {"prompt", r.prompt},
      {"has_new_line", r.content.find('\n') != std::string::npos},
      {"truncated", r.truncated},
      {"stop_type", native_stop_type(r.finish, r.stop_reason)},
      {"stopping_word", r.stop_reason.is_string() ? r.stop_reason.get<std::string>() : std::string()},
      {"tokens_cached", r.tokens_evaluated + r.tokens_predicted},
      {"timings", native_timings_json(r.timings)},
  };
  if (!r.probs.is_null()) res["completion_probabilities"] = r.probs;
  return select_response_fields(res, opts.response_fields);
}

json native_partial_json(int32_t index, const std::string& content, const std::vector<int32_t>& tokens,
                         int64_t tokens_predicted, int64_t tokens_evaluated, const NativeTimings* timings, json probs) {
  json res = {
      {"index", index},
      {"content", content},
      {"tokens", tokens},
      {"stop", false},
      {"id_slot", -1},
      {"tokens_predicted", tokens_predicted},
      {"tokens_evaluated", tokens_evaluated},
  };
  if (timings) res["timings"] = native_timings_json(*timings);
  if (!probs.is_null()) res["completion_probabilities"] = std::move(probs);
  return res;
}

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

NativeTimings timings_of(const Generation& gen, int32_t choice, size_t prompt) {
  const MappedRequest& m = gen.request();
  const ChoiceTiming& t = gen.timing(choice);
  NativeTimings out;
  out.cache_n = gen.cached_tokens(prompt);
  out.prompt_n = static_cast<int64_t>(m.prompts[prompt].request.prompt.size()) - out.cache_n;
  if (t.started) out.prompt_ms = ms_between(gen.arrival(), t.first_token);
  if (!m.native.prompt_only) {
    out.predicted_n = gen.completion_tokens(choice);
    if (t.started) out.predicted_ms = ms_between(t.first_token, t.last);
  }
  return out;
}

NativeResult result_of(const Generation& gen, int32_t choice, const Tokenizer& tok, bool stream) {
  const MappedRequest& m = gen.request();
  const size_t prompt = static_cast<size_t>(choice / m.n);
  const ChoiceOutput& c = gen.choices()[static_cast<size_t>(choice)];
  NativeResult r;
  r.index = choice;
  r.model = m.model;
  r.tokens_evaluated = static_cast<int64_t>(m.prompts[prompt].request.prompt.size());
  r.prompt = m.prompts[prompt].text;
  r.truncated = m.prompts[prompt].truncated;
  r.timings = timings_of(gen, choice, prompt);
  r.finish = c.finish;
  r.stop_reason = c.stop_reason;
  if (m.native.prompt_only) {  // n_predict 0: the one token generated is not the answer's
    r.finish = FinishReason::Length;
    r.stop_reason = nullptr;
    return r;
  }
  r.tokens_predicted = gen.completion_tokens(choice);
  if (!stream) {
    r.content = c.text;
    r.tokens = c.token_ids;
    if (m.logprobs) r.probs = native_probs_json(tok, c.token_ids, c.logprobs, m.top_logprobs);
  }
  return r;
}

}  // namespace

json native_response(const Generation& gen, const Tokenizer& tok) {
  const MappedRequest& m = gen.request();
  const int32_t n = static_cast<int32_t>(gen.choices().size());
  if (n == 1) return native_final_json(result_of(gen, 0, tok, false), m.native);
  json all = json::array();
  for (int32_t i = 0; i < n; ++i) all.push_back(native_final_json(result_of(gen, i, tok, false), m.native));
  return all;
}

std::string native_stream_events(const Generation& gen, const OutputItem& it, const Tokenizer& tok) {
  const MappedRequest& m = gen.request();
  const RequestOutput& o = it.out;
  const int32_t ci = gen.choice_index(it);
  std::string events;
  if (!m.native.prompt_only && (!o.text.empty() || !o.token_ids.empty())) {
    NativeTimings t;
    if (m.native.timings_per_token) t = timings_of(gen, ci, it.prompt);
    json probs = m.logprobs ? native_probs_json(tok, o.token_ids, o.logprobs, m.top_logprobs) : json(nullptr);
    events += sse_event(native_partial_json(ci, o.text, o.token_ids, o.completion_tokens, o.prompt_tokens,
                                            m.native.timings_per_token ? &t : nullptr, std::move(probs)));
  }
  if (o.finished) events += sse_event(native_final_json(result_of(gen, ci, tok, true), m.native));
  return events;
}

json select_response_fields(const json& res, const std::vector<std::string>& fields) {
  if (fields.empty()) return res;
  json out = json::object();
  for (const std::string& path : fields) {
    const json* cur = &res;
    size_t start = 0;
    bool found = true;
    while (found) {
      const size_t slash = path.find('/', start);
      const std::string key = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (!cur->is_object() || !cur->contains(key)) found = false;
      else cur = &(*cur)[key];
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (found) out[path] = *cur;
  }
  return out;
}

}  // namespace tmill::server
