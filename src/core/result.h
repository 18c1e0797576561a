// Result<T> / Status: errors for I/O, configuration and user input.
// Broken invariants use TM_ASSERT (core/log.h) instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tmill {

struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}             // NOLINT: implicit on purpose
  Result(Error error) : v_(std::move(error)) {}         // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const std::string& error() const { return std::get<1>(v_).message; }
  Error error_value() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return err_.message; }
  Error error_value() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace tmill

#define TM_CONCAT_INNER_(a, b) a##b
#define TM_CONCAT_(a, b) TM_CONCAT_INNER_(a, b)

// Return the error of a Status/Result expression from the enclosing function.
#define TM_TRY(expr)                                             \
  do {                                                           \
    auto&& tm_try_status_ = (expr);                              \
    if (!tm_try_status_.ok()) return tm_try_status_.error_value(); \
  } while (0)

// TM_ASSIGN_OR_RETURN(auto x, make_x()); — declares/assigns lhs or returns the error.
#define TM_ASSIGN_OR_RETURN(lhs, expr) TM_ASSIGN_OR_RETURN_IMPL_(TM_CONCAT_(tm_res_, __LINE__), lhs, expr)
#define TM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.error_value();        \
  lhs = std::move(tmp).value()
