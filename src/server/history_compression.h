// Server-side history compression for long chats (docs/server.md, "History compression"): when a
// conversation's prompt passes a share of the context, its oldest whole turns are replaced by a
// summary the model writes itself, and the summary is cached under a hash of the conversation's
// prefix (the leading system messages and the turns it replaced), so the next turn of the same
// conversation reuses it without generating again; a later compression summarizes only the turns
// since the cached summary, starting from it.
//
// The planning is pure (plan_compression: no engine), the summary is generated through a callback,
// so unit tests drive it with a fake model and the server with the engine (routes_select.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/result.h"
#include "server/openai_request.h"

namespace tmill::server {

// serve --compress-history / --compress-threshold / --compress-prompt / --compress-max-tokens.
struct CompressionOptions {
  bool default_on = false;      // requests without "context_management": {"compress": ...}
  double threshold = 0.75;      // compress when the prompt passes this share of the context
  int32_t summary_max_tokens = 256;
  std::string prompt =
      "Summarize the conversation below in a few sentences. Keep names, facts, decisions and open "
      "questions; write only the summary.";
};

// CompressionReport (what compression did) is in openai_request.h: MappedRequest carries it.

// Summaries by conversation-prefix hash, least recently used dropped past `capacity`. Thread-safe.
class SummaryCache {
 public:
  explicit SummaryCache(size_t capacity = 1024) : capacity_(capacity) {}
  std::optional<std::string> get(uint64_t key);
  void put(uint64_t key, std::string summary);
  size_t size() const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::pair<uint64_t, std::string>> lru_;  // front = most recent
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, std::string>>::iterator> map_;
};

// One summarization: the system instruction and the transcript to summarize; returns the summary
// text and its request's usage, or an error.
struct SummaryJob {
  std::string instruction;
  std::string transcript;  // "role: content" lines, the previous summary first when extending one
};
struct SummaryResult {
  std::string text;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};
using Summarizer = std::function<Result<SummaryResult>(const SummaryJob&)>;

// Whether the request asks for compression: "context_management": {"compress": bool}, else the
// server default. A malformed field throws RequestError (400 naming it).
bool compression_requested(const json& body, const CompressionOptions& opts);

// Compresses body["messages"] in place when the rendered prompt passes opts.threshold of the
// context: leading system/developer messages stay, the oldest turns (a user message and what follows
// it up to the next) give way to one summary appended to the first system message (or a new system
// message), the latest turn always stays. Reuses a cached summary when one covers a prefix of the
// turns and the result fits; otherwise summarizes (from the cached one, if any) the turns that must
// go so that the prompt takes about half the threshold. `key_salt` separates models. Throws
// RequestError for malformed bodies (as mapping would); a failed summary is an Error.
Result<CompressionReport> compress_history(json& body, const ServerContext& ctx, const CompressionOptions& opts,
                                           SummaryCache& cache, uint64_t key_salt, const Summarizer& summarize);

}  // namespace tmill::server
