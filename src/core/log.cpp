#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tmill {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Info)};
std::mutex g_mutex;
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
    default: return "";
  }
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_write(LogLevel level, std::string_view message) {
  using namespace std::chrono;
  auto now = system_clock::now();
  auto t = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tmv{};
  gmtime_r(&t, &tmv);
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s %.*s\n", tmv.tm_year + 1900, tmv.tm_mon + 1,
               tmv.tm_mday, tmv.tm_hour, tmv.tm_min, tmv.tm_sec, static_cast<int>(ms), level_name(level),
               static_cast<int>(message.size()), message.data());
}

void assert_fail(const char* expr, const char* file, int line, std::string_view msg) {
  std::fprintf(stderr, "tokenmill: internal invariant failed: %s at %s:%d %.*s\n", expr, file, line,
               static_cast<int>(msg.size()), msg.data());
  std::abort();
}

}  // namespace tmill
