#include "server/http.h"
#include "server/http_parser.h"

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

std::string HttpRequest::query_param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    const size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq), true) == name)
      return eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true);
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return "";
}

}  // namespace tmill::server
