#include "server/http.h"

#include <strings.h>

namespace tmill::server {

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && ::strncasecmp(k.data(), name.data(), name.size()) == 0) return &v;
  return nullptr;
}

std::string HttpRequest::header_or(std::string_view name, std::string fallback) const {
  const std::string* v = header(name);
  return v ? *v : std::move(fallback);
}

}  // namespace tmill::server
