#include "server/api_error.h"

namespace tmill::server {

std::string error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

json error_json(const ApiError& e) {
  json inner;
  inner["message"] = e.message;
  inner["type"] = e.type.empty() ? error_type(e.status) : e.type;
  inner["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  inner["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  json out;
  out["error"] = std::move(inner);
  return out;
}

std::string error_body(const ApiError& e) {
  return error_json(e).dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* request_failure_reason(const ApiError& e) {
  return e.status == 404 ? "not_found" : e.status == 503 ? "unavailable" : "invalid_request";
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

void throw_bad_request(std::string message, std::string param) {
  throw RequestError{bad_request(std::move(message), std::move(param))};
}

}  // namespace tmill::server
