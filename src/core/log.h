// Logging to stderr (stdout belongs to command output) and invariant assertions.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace tmill {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

template <class... A>
void log_debug(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Debug) log_write(LogLevel::Debug, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void log_info(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Info) log_write(LogLevel::Info, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void log_warn(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Warn) log_write(LogLevel::Warn, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void log_error(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Error) log_write(LogLevel::Error, fmt::format(f, std::forward<A>(a)...));
}

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, std::string_view msg);

}  // namespace tmill

// Broken invariants only (never user input): print and abort.
#define TM_ASSERT(cond, ...)                                                          \
  do {                                                                                \
    if (!(cond)) ::tmill::assert_fail(#cond, __FILE__, __LINE__, "" __VA_ARGS__);     \
  } while (0)
