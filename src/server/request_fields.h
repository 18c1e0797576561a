// Typed access to request JSON fields with OpenAI-style validation: an absent field or JSON null means
// "not given"; a present field of the wrong type is a 400 naming the field. Throws RequestError
// (caught by the mapping functions, see api_error.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace tmill::server {

// Parses a request body. Errors (400): not JSON, invalid UTF-8, nesting deeper than max_depth, not an object.
json parse_body(std::string_view body, int max_depth = 64);
// The same for a body of any JSON value (llama-server's POST /lora-adapters takes a list).
json parse_json_value(std::string_view body, int max_depth = 64);

const json* field(const json& obj, const char* key);  // nullptr when absent or null

std::optional<bool> opt_bool(const json& obj, const char* key);
// Integers; a float with an integral value is accepted (5.0), anything else is a 400.
std::optional<int64_t> opt_int(const json& obj, const char* key, int64_t min, int64_t max);
// Finite numbers in [min, max].
std::optional<double> opt_number(const json& obj, const char* key, double min, double max);
// A finite number a float holds; what range it must be in is the engine's to check (check_request).
std::optional<float> opt_float(const json& obj, const char* key);
std::optional<std::string> opt_string(const json& obj, const char* key);

// Checks a value already extracted (arrays of ints etc.).
int64_t as_int(const json& v, const std::string& what, int64_t min, int64_t max);

}  // namespace tmill::server
