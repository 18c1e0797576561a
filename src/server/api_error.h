// OpenAI-shaped API errors: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tmill::server {

using json = nlohmann::ordered_json;

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the offending request field; empty -> null
  std::string code;   // machine-readable code ("invalid_api_key", "model_not_found", ...); empty -> null
  std::string type;   // empty -> derived from status (see error_type)
};

// "invalid_request_error" (4xx), "authentication_error" (401), "rate_limit_error"... see api_error.cpp.
std::string error_type(int status);
json error_json(const ApiError& e);
std::string error_body(const ApiError& e);  // error_json(e).dump()

ApiError bad_request(std::string message, std::string param = {}, std::string code = {});

// The reason a refused request counts under in tokenmill:request_failures_total: "not_found" (404),
// "unavailable" (503), else "invalid_request".
const char* request_failure_reason(const ApiError& e);

// Thrown inside request parsing/mapping code only; the public mapping functions catch it and return
// Result errors, so it never escapes the library API.
struct RequestError {
  ApiError error;
};
[[noreturn]] void throw_bad_request(std::string message, std::string param = {});

}  // namespace tmill::server
