// The transport's share of --memory-limit: bytes held for requests and responses (bytes received,
// request bodies and what parsing them takes, response output buffers), counted against a limit.
//
//   MemoryBudget b(64 << 20);           // 0: no limit (still counted, for the metrics)
//   if (!b.try_reserve(n)) shed();       // a new request's body: refused when it does not fit
//   b.force(n);                          // memory already allocated (a response's bytes): counted
//   b.release(n);
//
// The HTTP transport charges each connection's buffers as they grow and sheds (503, or closes a
// connection that is still sending its head) what does not fit; streams whose readers lag wait while
// the budget is over its limit. Models (weights + KV) have their own share (ModelRegistry).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace tmill::server {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit = 0) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Counts n bytes if they fit under the limit; false (nothing counted) otherwise.
  bool try_reserve(uint64_t n);
  // Counts n bytes whether or not they fit (memory already in use).
  void force(uint64_t n);
  void release(uint64_t n);
  // Grows or shrinks a charge of `*held` bytes to `want`: false (and *held unchanged) when the
  // growth does not fit and !force.
  bool adjust(uint64_t* held, uint64_t want, bool force);

  bool over() const { return limit_ != 0 && used_.load(std::memory_order_relaxed) > limit_; }
  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  void count_refusal() { refused_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void note_peak(uint64_t v);
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0}, peak_{0}, refused_{0};
};

// What handling a JSON request body takes at most, in bytes, the body itself included: the parsed
// tree (nlohmann::json: a node per value, object members in a map, strings copied), the strings'
// second copies (prompts, messages rendered through the chat template) and the token ids a prompt
// becomes. One pass over the bytes; an estimate from above, measured against the server's resident
// memory in tests/e2e/memory_limit.test.mjs.
uint64_t request_memory_estimate(std::string_view body);

}  // namespace tmill::server
