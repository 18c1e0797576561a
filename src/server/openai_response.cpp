#include "server/openai_response.h"

#include <chrono>
#include <random>

#include <fmt/format.h>

#include "tokenizer/tokenizer.h"

namespace tmill::server {

std::string random_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

ResponseMeta make_meta(ApiKind kind, const std::string& model) {
  ResponseMeta m;
  m.kind = kind;
  m.model = model;
  m.id = random_id(kind == ApiKind::Chat ? "chatcmpl-" : "cmpl-");
  m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return m;
}

json usage_json(const Usage& u) {
  json j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  if (u.dropped_messages > 0) {
    j["truncation"] = {{"dropped_messages", u.dropped_messages}, {"dropped_prompt_tokens", u.dropped_tokens}};
  }
  if (const CompressionReport& c = u.compression; c.compressed_messages > 0) {
    j["compression"] = {{"compressed_messages", c.compressed_messages},
                        {"saved_prompt_tokens", c.saved_prompt_tokens},
                        {"summary_tokens", c.summary_tokens},
                        {"cached", c.cached},
                        {"summary_prompt_tokens", c.summary_prompt_tokens},
                        {"summary_completion_tokens", c.summary_completion_tokens}};
  }
  return j;
}

const char* finish_reason_string(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
    default: return "";
  }
}

json finish_reason_json(FinishReason r) {
  return r == FinishReason::None ? json(nullptr) : json(finish_reason_string(r));
}

std::string token_string(const Tokenizer& tok, int32_t id) { return tok.token_to_piece(id); }

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

double finite_logprob(float lp) { return std::isfinite(lp) ? lp : -9999.0; }

json chat_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::vector<SampleResult>& lps,
                        int32_t top_n) {
  json content = json::array();
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    const std::string t = token_string(tok, ids[i]);
    json e;
    e["token"] = t;
    e["logprob"] = finite_logprob(lps[i].logprob);
    e["bytes"] = bytes_json(t);
    json top = json::array();
    for (size_t k = 0; k < lps[i].top.size() && static_cast<int32_t>(k) < top_n; ++k) {
      const std::string tt = token_string(tok, lps[i].top[k].token);
      top.push_back({{"token", tt}, {"logprob", finite_logprob(lps[i].top[k].logprob)}, {"bytes", bytes_json(tt)}});
    }
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}};
}

json completion_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& ids,
                              const std::vector<SampleResult>& lps, int32_t top_n, int64_t* offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    const std::string t = token_string(tok, ids[i]);
    tokens.push_back(t);
    token_logprobs.push_back(finite_logprob(lps[i].logprob));
    json alts = json::object();
    // The chosen token is always listed (OpenAI/vLLM include it in top_logprobs).
    for (size_t k = 0; k < lps[i].top.size() && static_cast<int32_t>(k) < top_n; ++k)
      alts[token_string(tok, lps[i].top[k].token)] = finite_logprob(lps[i].top[k].logprob);
    if (!alts.contains(t)) alts[t] = finite_logprob(lps[i].logprob);
    top.push_back(std::move(alts));
    offsets.push_back(*offset);
    *offset += static_cast<int64_t>(utf8_length(t));
  }
  json j;
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(token_logprobs);
  j["top_logprobs"] = std::move(top);
  j["text_offset"] = std::move(offsets);
  return j;
}

namespace {

json base_object(const ResponseMeta& meta, const char* object) {
  json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

void add_truncation(const ResponseMeta& meta, json& j) {
  if (meta.prompt_truncated) j["prompt_truncated"] = true;
}

}  // namespace

json chat_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage,
                   const Tokenizer& tok, LogprobsSpec lp) {
  json j = base_object(meta, "chat.completion");
  json arr = json::array();
  for (const ChoiceOutput& c : choices) {
    json ch;
    ch["index"] = c.index;
    const bool calls = c.tool_calls.is_array() && !c.tool_calls.empty();
    // As vLLM: no answer is null when the message carries tool calls or a reasoning split.
    const bool null_if_empty = calls || c.reasoning_split;
    ch["message"] = {{"role", "assistant"}, {"content", null_if_empty && c.text.empty() ? json(nullptr) : json(c.text)}};
    if (c.reasoning_split) ch["message"]["reasoning_content"] = c.reasoning ? json(*c.reasoning) : json(nullptr);
    if (calls) ch["message"]["tool_calls"] = c.tool_calls;
    ch["logprobs"] = lp.enabled ? chat_logprobs_json(tok, c.token_ids, c.logprobs, lp.top_n) : json(nullptr);
    ch["finish_reason"] = calls && c.finish == FinishReason::Stop ? json("tool_calls") : finish_reason_json(c.finish);
    ch["stop_reason"] = c.stop_reason;
    arr.push_back(std::move(ch));
  }
  j["choices"] = std::move(arr);
  j["usage"] = usage_json(usage);
  add_truncation(meta, j);
  return j;
}

json completion_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage,
                         const Tokenizer& tok, LogprobsSpec lp, const std::vector<std::string>& echo_prefix) {
  json j = base_object(meta, "text_completion");
  json arr = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& c = choices[i];
    const std::string prefix = i < echo_prefix.size() ? echo_prefix[i] : std::string();
    json ch;
    ch["index"] = c.index;
    ch["text"] = prefix + c.text;
    int64_t offset = static_cast<int64_t>(utf8_length(prefix));
    ch["logprobs"] = lp.enabled ? completion_logprobs_json(tok, c.token_ids, c.logprobs, lp.top_n, &offset)
                                : json(nullptr);
    ch["finish_reason"] = finish_reason_json(c.finish);
    ch["stop_reason"] = c.stop_reason;
    arr.push_back(std::move(ch));
  }
  j["choices"] = std::move(arr);
  j["usage"] = usage_json(usage);
  add_truncation(meta, j);
  return j;
}

json chat_chunk(const ResponseMeta& meta, int32_t index, json delta, json logprobs, FinishReason finish,
                json stop_reason, const json* usage) {
  json j = base_object(meta, "chat.completion.chunk");
  json ch;
  ch["index"] = index;
  ch["delta"] = std::move(delta);
  ch["logprobs"] = std::move(logprobs);
  ch["finish_reason"] = finish_reason_json(finish);
  if (finish != FinishReason::None) ch["stop_reason"] = std::move(stop_reason);
  j["choices"] = json::array({std::move(ch)});
  if (usage) j["usage"] = *usage;
  add_truncation(meta, j);
  return j;
}

json completion_chunk(const ResponseMeta& meta, int32_t index, const std::string& text, json logprobs,
                      FinishReason finish, json stop_reason, const json* usage) {
  json j = base_object(meta, "text_completion");
  json ch;
  ch["index"] = index;
  ch["text"] = text;
  ch["logprobs"] = std::move(logprobs);
  ch["finish_reason"] = finish_reason_json(finish);
  if (finish != FinishReason::None) ch["stop_reason"] = std::move(stop_reason);
  j["choices"] = json::array({std::move(ch)});
  if (usage) j["usage"] = *usage;
  add_truncation(meta, j);
  return j;
}

json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json j = base_object(meta, meta.kind == ApiKind::Chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

const std::string& sse_done() {
  static const std::string done = "data: [DONE]\n\n";
  return done;
}

}  // namespace tmill::server
