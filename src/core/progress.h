// Progress of a long task (model load, convert, quantize, imatrix, bench) on stderr: on a terminal
// a bar redrawn in place, otherwise (logs, CI, a pipe) plain lines at every 10% and at the end.
//
//   terminal:  quantize [##########..........]  50%  40/80 tensors  blk.9.ffn_up.weight
//   not a TTY: quantize:  50% (40/80 tensors)
//              quantize: 100% (80/80 tensors) in 3.2 s
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace tmill {

class ProgressBar {
 public:
  enum class Mode { Auto, Bar, Lines, Off };
  // Auto: $TOKENMILL_PROGRESS (bar, lines, off) when set, else Bar when `out` is a terminal, else Lines.
  static Mode resolve(Mode m, FILE* out);

  // `unit` names what is counted ("tensors", "chunks", "requests").
  ProgressBar(std::string label, uint64_t total, std::string unit, Mode mode = Mode::Auto, FILE* out = stderr);
  ~ProgressBar();  // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Thread-safe. `detail` (the tensor's name, say) shows on the bar only.
  void update(uint64_t done, std::string_view detail = {});
  void set_total(uint64_t total);
  // Erases the bar from the terminal so other output can be printed there; the next update redraws it.
  void clear();
  // Ends the bar's line; a line display prints its last line (100%, elapsed time) if not printed.
  void finish();
  Mode mode() const { return mode_; }

  // "[#####.....]" for a fraction in [0, 1].
  static std::string bar(double fraction, int width);

 private:
  void draw_locked(uint64_t done, std::string_view detail, bool force);

  std::string label_, unit_;
  uint64_t total_;
  Mode mode_;
  FILE* out_;
  std::mutex mu_;
  int last_decile_ = -1;
  uint64_t last_done_ = 0;
  bool finished_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point t0_, last_draw_;
};

}  // namespace tmill
