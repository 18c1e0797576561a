// API keys: "Authorization: Bearer <key>" checked against the configured keys in constant time
// (the time depends only on the lengths, never on where the first differing byte is, nor on which
// key matched).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tmill::server {

bool constant_time_equals(std::string_view a, std::string_view b);

// The key in an Authorization header value ("Bearer KEY", scheme case-insensitive), or "" if none.
std::string_view bearer_token(std::string_view authorization);

// True when no keys are configured, or the header carries one of them.
bool authorized(const std::vector<std::string>& keys, std::string_view authorization);

}  // namespace tmill::server
