// Progress display on stderr: a redrawn bar on a terminal, an occasional plain line otherwise
// (logs, CI). Thread-safe counters are updated by the load workers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace tmill::loadgen {

class Progress {
 public:
  enum class Mode { Off, Bar, Lines };
  // Mode::Bar when `enabled` and stderr is a TTY, Lines when enabled but not a TTY.
  static Mode pick_mode(bool enabled);

  // `total` requests (<= 0: unknown, time-driven run lasting `duration_s`).
  Progress(Mode mode, std::string label, int64_t total, double duration_s = 0, FILE* out = stderr);
  ~Progress();
  void start();
  void finish();

  void on_done(bool ok, int output_tokens) {
    done_.fetch_add(1);
    if (!ok) errors_.fetch_add(1);
    tokens_.fetch_add(output_tokens);
  }
  void set_in_flight(int n) { in_flight_.store(n); }

  // One status line (no newline), e.g. "conc=8 [#####-----] 45/100 req  812.3 tok/s  0 err  8 in flight".
  std::string render(double elapsed_s, double tok_per_s, int width) const;

 private:
  void loop();

  Mode mode_;
  std::string label_;
  int64_t total_;
  double duration_s_;
  FILE* out_;
  std::atomic<int64_t> done_{0}, errors_{0}, tokens_{0};
  std::atomic<int> in_flight_{0};
  std::chrono::steady_clock::time_point t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
  std::thread thread_;
};

}  // namespace tmill::loadgen
