#include "loadgen/progress.h"

#include <unistd.h>

#include <deque>
#include <fmt/format.h>

namespace tmill::loadgen {

Progress::Mode Progress::pick_mode(bool enabled) {
  if (!enabled) return Mode::Off;
  return isatty(STDERR_FILENO) ? Mode::Bar : Mode::Lines;
}

Progress::Progress(Mode mode, std::string label, int64_t total, double duration_s, FILE* out)
    : mode_(mode), label_(std::move(label)), total_(total), duration_s_(duration_s), out_(out) {}

Progress::~Progress() { finish(); }

void Progress::start() {
  t0_ = std::chrono::steady_clock::now();
  started_ = true;
  if (mode_ == Mode::Off || thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

std::string Progress::render(double elapsed, double tps, int width) const {
  const int64_t done = done_.load();
  double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_)
                           : (duration_s_ > 0 ? elapsed / duration_s_ : 0.0);
  frac = frac < 0 ? 0 : (frac > 1 ? 1 : frac);
  const int filled = static_cast<int>(frac * width + 0.5);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '-');
  std::string count = total_ > 0 ? fmt::format("{}/{} req", done, total_)
                                 : fmt::format("{} req {:.0f}/{:.0f}s", done, elapsed, duration_s_);
  return fmt::format("{} [{}] {}  {:.1f} tok/s  {} err  {} in flight", label_, bar, count, tps,
                     errors_.load(), in_flight_.load());
}

void Progress::loop() {
  // Live throughput: output tokens finished over the last ~5 s.
  std::deque<std::pair<double, int64_t>> window;
  double last_line = 0;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::milliseconds(250), [&] { return stop_; });
    if (stop_) break;
    double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    window.emplace_back(now, tokens_.load());
    while (window.size() > 2 && now - window.front().first > 5.0) window.pop_front();
    double dt = now - window.front().first;
    double tps = dt > 0 ? static_cast<double>(window.back().second - window.front().second) / dt : 0;
    if (mode_ == Mode::Bar) {
      std::fprintf(out_, "\r%s\x1b[K", render(now, tps, 30).c_str());
      std::fflush(out_);
    } else if (now - last_line >= 5.0) {
      last_line = now;
      std::fprintf(out_, "%s\n", render(now, tps, 20).c_str());
      std::fflush(out_);
    }
  }
}

void Progress::finish() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (mode_ == Mode::Off || !started_) return;
  double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  double tps = now > 0 ? static_cast<double>(tokens_.load()) / now : 0;
  if (mode_ == Mode::Bar) std::fprintf(out_, "\r%s\x1b[K\n", render(now, tps, 30).c_str());
  else std::fprintf(out_, "%s\n", render(now, tps, 20).c_str());
  std::fflush(out_);
}

}  // namespace tmill::loadgen
