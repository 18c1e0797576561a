// Incremental parser for Server-Sent Events (text/event-stream), as streamed by OpenAI-compatible
// servers: `data: {...}\n\n` ... `data: [DONE]\n\n`.
//
// Bytes arrive in arbitrary pieces (an event, or even a CR LF pair, may be split across reads), so the
// parser keeps the unfinished line between feed() calls. Follows the WHATWG event-stream rules:
// lines end in LF, CR or CR LF; a blank line dispatches the event; lines starting with ':' are
// comments; "field: value" drops one leading space of the value; several data lines are joined
// with '\n'; unknown fields are ignored.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tmill::loadgen {

struct SseEvent {
  std::string event;  // "event:" field; empty means the default "message"
  std::string data;   // "data:" lines joined by '\n'
  std::string id;
};

class SseParser {
 public:
  using Handler = std::function<void(const SseEvent&)>;

  // A line longer than this marks the stream as malformed (protects against an endless line).
  explicit SseParser(size_t max_line_bytes = 64u << 20) : max_line_(max_line_bytes) {}

  // Feeds raw bytes; calls `on_event` for every completed event. Returns false once the stream is
  // malformed (over-long line); further input is then ignored.
  bool feed(std::string_view bytes, const Handler& on_event);
  // End of stream: a final event without its terminating blank line is still dispatched
  // (lenient; some servers close right after the last data line).
  void finish(const Handler& on_event);

  bool malformed() const { return malformed_; }
  size_t events_dispatched() const { return events_; }

 private:
  void process_line(std::string_view line, const Handler& on_event);
  void dispatch(const Handler& on_event);

  std::string line_;
  SseEvent pending_;
  bool has_data_ = false;
  bool skip_lf_ = false;  // the previous piece ended in CR: a leading LF belongs to that CR
  bool malformed_ = false;
  size_t max_line_;
  size_t events_ = 0;
};

}  // namespace tmill::loadgen
