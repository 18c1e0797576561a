#include "server/memory_budget.h"

namespace tmill::server {

bool MemoryBudget::try_reserve(uint64_t n) {
  uint64_t cur = used_.load(std::memory_order_relaxed);
  for (;;) {
    if (limit_ != 0 && (cur + n > limit_ || cur + n < cur)) {
      return false;
    }
    if (used_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed)) break;
  }
  note_peak(cur + n);
  return true;
}

void MemoryBudget::force(uint64_t n) { note_peak(used_.fetch_add(n, std::memory_order_relaxed) + n); }

void MemoryBudget::release(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

bool MemoryBudget::adjust(uint64_t* held, uint64_t want, bool force_it) {
  if (want == *held) return true;
  if (want < *held) {
    release(*held - want);
  } else if (force_it) {
    force(want - *held);
  } else if (!try_reserve(want - *held)) {
    return false;
  }
  *held = want;
  return true;
}

void MemoryBudget::note_peak(uint64_t v) {
  uint64_t p = peak_.load(std::memory_order_relaxed);
  while (v > p && !peak_.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

// Per-byte and per-value costs, measured (tests/e2e/memory_limit.test.mjs prints the server's PSS
// growth per body byte for each shape of body; these are above every measured figure):
//   - a string's bytes: the body, the tree's copy, the route's copy (prompt, message content), the
//     chat template's rendering, and the token ids (int32, up to one per byte for byte-level BPE
//     fallback) with the tokenizer's working set;
//   - a value: the tree's node (16 bytes in a vector or a map node of ~100 bytes with its key), a
//     string's own record and malloc's overhead, and what a route builds per value (a token id
//     array becomes a vector<int32>, a message a struct with strings).
namespace {
constexpr uint64_t kPerStringByte = 56;
constexpr uint64_t kPerValue = 128;
constexpr uint64_t kFixed = 16u << 10;  // the request's own records, headers, response
}  // namespace

uint64_t request_memory_estimate(std::string_view body) {
  uint64_t string_bytes = 0, values = 0;
  bool in_string = false, escaped = false, in_scalar = false;
  for (const char ch : body) {
    if (in_string) {
      string_bytes++;
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    switch (ch) {
      case '"':
        in_string = true;
        in_scalar = false;
        values++;
        break;
      case '{':
      case '[':
        values++;
        in_scalar = false;
        break;
      case ',':
      case ':':
      case '}':
      case ']':
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        in_scalar = false;
        break;
      default:  // a number, true, false, null: one value per run of such bytes
        if (!in_scalar) values++;
        in_scalar = true;
        break;
    }
  }
  return kFixed + static_cast<uint64_t>(body.size()) + string_bytes * kPerStringByte + values * kPerValue;
}

}  // namespace tmill::server
