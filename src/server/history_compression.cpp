// History compression: the plan (which turns go, a cached summary or a new one) and the rewrite of
// `messages`. Candidates are rendered with the request's own template options and tokenized as the
// mapping will, so the lengths compared with the threshold are the real ones.
#include "server/history_compression.h"

#include <span>

#include <fmt/format.h>

#include "chat/messages.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

std::optional<std::string> SummaryCache::get(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void SummaryCache::put(uint64_t key, std::string summary) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = map_.find(key); it != map_.end()) {
    it->second->second = std::move(summary);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, std::move(summary));
  map_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t SummaryCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

bool compression_requested(const json& body, const CompressionOptions& opts) {
  const json* cm = field(body, "context_management");
  if (!cm) return opts.default_on;
  if (!cm->is_object()) throw_bad_request("'context_management' must be an object", "context_management");
  const json* c = field(*cm, "compress");
  if (!c) return opts.default_on;
  if (!c->is_boolean()) throw_bad_request("'context_management.compress' must be a boolean", "context_management");
  return c->get<bool>();
}

namespace {

std::string role_of(const json& m) {
  const json* r = m.is_object() ? field(m, "role") : nullptr;
  return r && r->is_string() ? r->get<std::string>() : std::string();
}

// A message's text: its string content, or its text parts joined.
std::string content_text(const json& m) {
  const json* c = m.is_object() ? field(m, "content") : nullptr;
  if (!c) return {};
  if (c->is_string()) return c->get<std::string>();
  std::string out;
  if (c->is_array())
    for (const json& part : *c)
      if (part.is_object() && part.contains("text") && part["text"].is_string()) out += part["text"].get<std::string>();
  return out;
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h ^ 0xff;  // a separator, so ("ab","c") and ("a","bc") differ
}

constexpr const char* kSummaryHeader = "Summary of the earlier conversation:\n";

// The messages with [prefix, start) replaced by the summary: appended to the first system message
// when it has text content, else a system message of its own at the front.
json with_summary(const json& msgs, size_t prefix, size_t start, const std::string& summary) {
  json out = json::array();
  for (size_t i = 0; i < prefix; ++i) out.push_back(msgs[i]);
  const std::string note = kSummaryHeader + summary;
  if (prefix > 0 && out[0].contains("content") && out[0]["content"].is_string()) {
    out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + note;
  } else {
    out.insert(out.begin(), json{{"role", "system"}, {"content", note}});
  }
  for (size_t i = start; i < msgs.size(); ++i) out.push_back(msgs[i]);
  return out;
}

}  // namespace

Result<CompressionReport> compress_history(json& body, const ServerContext& ctx, const CompressionOptions& opts,
                                           SummaryCache& cache, uint64_t key_salt, const Summarizer& summarize) {
  CompressionReport rep;
  if (!compression_requested(body, opts)) return rep;
  const json* mp = field(body, "messages");
  if (!mp || !mp->is_array()) return rep;  // mapping says what is wrong
  const json msgs = *mp;
  const bool add_special = opt_bool(body, "add_special_tokens").value_or(false);
  auto prompt_len = [&](const json& m) {
    const std::string text = detail::render_messages(body, ctx, &m);
    return static_cast<int64_t>(tokenize_chat_prompt(text, *ctx.tokenizer, add_special).size());
  };
  const auto limit = static_cast<int64_t>(opts.threshold * ctx.max_model_len);
  const int64_t full = prompt_len(msgs);
  if (full <= limit) return rep;

  size_t prefix = 0;
  while (prefix < msgs.size() && (role_of(msgs[prefix]) == "system" || role_of(msgs[prefix]) == "developer")) ++prefix;
  std::vector<size_t> starts{prefix};  // turn k = [starts[k], starts[k + 1])
  for (size_t i = prefix + 1; i < msgs.size(); ++i)
    if (role_of(msgs[i]) == "user") starts.push_back(i);
  const size_t turns = starts.size();
  if (turns < 2) return rep;  // only the latest turn: nothing to compress

  // keys[k]: the conversation up to turn k (system messages, instruction, model and turns 0..k-1).
  std::vector<uint64_t> keys(turns, 0);
  uint64_t h = fnv1a(1469598103934665603ULL ^ key_salt, opts.prompt);
  for (size_t i = 0; i < prefix; ++i) h = fnv1a(h, msgs[i].dump());
  for (size_t k = 1, i = prefix; k < turns; ++k) {
    for (; i < starts[k]; ++i) h = fnv1a(h, msgs[i].dump());
    keys[k] = h;
  }

  size_t k_cached = 0;
  std::string cached;
  for (size_t k = turns - 1; k >= 1; --k) {
    if (auto s = cache.get(keys[k])) {
      k_cached = k;
      cached = std::move(*s);
      break;
    }
  }
  auto finish = [&](size_t k, const std::string& summary, bool from_cache) {
    json out = with_summary(msgs, prefix, starts[k], summary);
    const int64_t n = prompt_len(out);
    rep.compressed_messages = static_cast<int32_t>(starts[k] - prefix);
    rep.saved_prompt_tokens = static_cast<int32_t>(full - n);
    rep.summary_tokens = static_cast<int32_t>(ctx.tokenizer->encode(summary, false, false).size());
    rep.cached = from_cache;
    body["messages"] = std::move(out);
  };
  if (k_cached > 0) {
    json out = with_summary(msgs, prefix, starts[k_cached], cached);
    if (prompt_len(out) <= limit || k_cached == turns - 1) {
      finish(k_cached, cached, true);
      return rep;
    }
  }

  // A new summary: the fewest more turns that bring the prompt (with a summary of the largest size)
  // down to half the threshold, so the next turns reuse it for a while; at most all but the latest.
  const int64_t target = limit / 2;
  auto estimate = [&](size_t k) {
    return prompt_len(with_summary(msgs, prefix, starts[k], "")) + opts.summary_max_tokens;
  };
  size_t lo = k_cached + 1, hi = turns - 1;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (estimate(mid) <= target) hi = mid;
    else lo = mid + 1;
  }
  const size_t k_new = lo;

  SummaryJob job;
  job.instruction = opts.prompt;
  const std::string head = k_cached > 0 ? "Summary so far: " + cached + "\n\n" : std::string();
  std::string turns_text;
  for (size_t i = k_cached > 0 ? starts[k_cached] : prefix; i < starts[k_new]; ++i)
    turns_text += role_of(msgs[i]) + ": " + content_text(msgs[i]) + "\n";
  // The turns' latest part when all of them cannot fit the summarization request.
  auto count = [&](const std::string& s) { return static_cast<int64_t>(ctx.tokenizer->encode(s, false, false).size()); };
  const int64_t budget = ctx.max_model_len - opts.summary_max_tokens - count(job.instruction) - count(head) - 64;
  if (budget < 16) return Error{"the context is too small for a summary"};
  const std::vector<int32_t> ids = ctx.tokenizer->encode(turns_text, false, false);
  if (static_cast<int64_t>(ids.size()) > budget)
    turns_text = ctx.tokenizer->decode(std::span(ids).last(static_cast<size_t>(budget)));
  job.transcript = head + turns_text;

  auto res = summarize(job);
  if (!res.ok()) return Error{"history compression: " + res.error()};
  std::string summary = res->text;
  while (!summary.empty() && (summary.back() == ' ' || summary.back() == '\n')) summary.pop_back();
  while (!summary.empty() && (summary.front() == ' ' || summary.front() == '\n')) summary.erase(0, 1);
  cache.put(keys[k_new], summary);
  finish(k_new, summary, false);
  rep.summary_prompt_tokens = res->prompt_tokens;
  rep.summary_completion_tokens = res->completion_tokens;
  return rep;
}

}  // namespace tmill::server
