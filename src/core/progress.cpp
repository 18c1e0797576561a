#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace tmill {

ProgressBar::Mode ProgressBar::resolve(Mode m, FILE* out) {
  if (m != Mode::Auto) return m;
  if (const char* e = std::getenv("TOKENMILL_PROGRESS"); e && *e) {
    if (std::strcmp(e, "bar") == 0) return Mode::Bar;
    if (std::strcmp(e, "lines") == 0) return Mode::Lines;
    if (std::strcmp(e, "off") == 0) return Mode::Off;
  }
  return out && isatty(fileno(out)) == 1 ? Mode::Bar : Mode::Lines;
}

ProgressBar::ProgressBar(std::string label, uint64_t total, std::string unit, Mode mode, FILE* out)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), mode_(resolve(mode, out)), out_(out),
      t0_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int fill = static_cast<int>(fraction * width + 1e-9);
  std::string s = "[";
  s.append(static_cast<size_t>(fill), '#');
  s.append(static_cast<size_t>(width - fill), '.');
  return s + "]";
}

void ProgressBar::set_total(uint64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  total_ = total;
}

void ProgressBar::update(uint64_t done, std::string_view detail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || mode_ == Mode::Off) return;
  draw_locked(done, detail, false);
}

void ProgressBar::draw_locked(uint64_t done, std::string_view detail, bool force) {
  last_done_ = done;
  const double frac = total_ > 0 ? static_cast<double>(std::min(done, total_)) / static_cast<double>(total_) : 0.0;
  const int pct = static_cast<int>(frac * 100.0 + 1e-9);
  const auto now = std::chrono::steady_clock::now();
  const bool end = total_ > 0 && done >= total_;
  if (mode_ == Mode::Lines) {
    if (pct / 10 <= last_decile_ && !force) return;
    last_decile_ = pct / 10;
    std::string line = fmt::format("{}: {:3d}% ({}/{} {})", label_, pct, done, total_, unit_);
    if (end) line += fmt::format(" in {:.1f} s", std::chrono::duration<double>(now - t0_).count());
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
    if (end) finished_ = true;
    return;
  }
  // A terminal: at most 10 redraws a second, and always the last one.
  if (!force && !end && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  std::string line = fmt::format("\r{} {} {:3d}%  {}/{} {}", label_, bar(frac, 24), pct, done, total_, unit_);
  if (!detail.empty()) line += fmt::format("  {:<32.32}", detail);
  line += "\x1b[K";  // clear what a longer line left
  std::fputs(line.c_str(), out_);
  if (end) {
    std::fprintf(out_, " in %.1f s\n", std::chrono::duration<double>(now - t0_).count());
    finished_ = true;
  }
  std::fflush(out_);
}

void ProgressBar::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ != Mode::Bar || finished_ || !drawn_) return;
  std::fputs("\r\x1b[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

void ProgressBar::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || mode_ == Mode::Off) return;
  if (mode_ == Mode::Bar && drawn_) {  // a line display printed its last line at 100%
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  finished_ = true;
}

}  // namespace tmill
