#include "server/request_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tmill::server {

json parse_body(std::string_view body, int max_depth) {
  json j = parse_json_value(body, max_depth);
  if (!j.is_object()) throw_bad_request("The request body must be a JSON object");
  return j;
}

json parse_json_value(std::string_view body, int max_depth) {
  json j;
  try {
    // The callback sees every nesting level while parsing; refusing deep input here keeps later
    // recursive code (templates, dumps) safe.
    j = json::parse(body.begin(), body.end(), [max_depth](int depth, json::parse_event_t, json&) {
      if (depth > max_depth) throw RequestError{bad_request(fmt::format("JSON nesting deeper than {} levels", max_depth))};
      return true;
    });
  } catch (const RequestError&) {
    throw;
  } catch (const json::parse_error& e) {
    // nlohmann reports ill-formed UTF-8 and lone surrogates as parse errors.
    std::string what = e.what();
    const bool utf8 = what.find("UTF-8") != std::string::npos || what.find("surrogate") != std::string::npos;
    throw RequestError{bad_request(utf8 ? "Invalid UTF-8 in the request body: " + what
                                        : "Invalid JSON in the request body: " + what)};
  } catch (const std::exception& e) {
    throw RequestError{bad_request(std::string("Invalid JSON in the request body: ") + e.what())};
  }
  return j;
}

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> opt_bool(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw_bad_request(fmt::format("'{}' must be a boolean", key), key);
  return v->get<bool>();
}

int64_t as_int(const json& v, const std::string& what, int64_t min, int64_t max) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) x = INT64_MAX;  // out of every range below
    else x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18)
      throw_bad_request(fmt::format("'{}' must be an integer", what), what);
    x = static_cast<int64_t>(d);
  } else {
    throw_bad_request(fmt::format("'{}' must be an integer", what), what);
  }
  if (x < min || x > max) throw_bad_request(fmt::format("'{}' must be between {} and {}, got {}", what, min, max, x), what);
  return x;
}

std::optional<int64_t> opt_int(const json& obj, const char* key, int64_t min, int64_t max) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  return as_int(*v, key, min, max);
}

std::optional<double> opt_number(const json& obj, const char* key, double min, double max) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw_bad_request(fmt::format("'{}' must be a number", key), key);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max)
    throw_bad_request(fmt::format("'{}' must be between {} and {}, got {}", key, min, max, d), key);
  return d;
}

std::optional<float> opt_float(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw_bad_request(fmt::format("'{}' must be a number", key), key);
  const double d = v->get<double>();
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
    throw_bad_request(fmt::format("'{}' must be a finite number, got {}", key, d), key);
  return static_cast<float>(d);
}

std::optional<std::string> opt_string(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw_bad_request(fmt::format("'{}' must be a string", key), key);
  return v->get<std::string>();
}

}  // namespace tmill::server
