// API keys with names, roles and limits (serve's --api-key-file, docs/server.md "API keys"):
//
//   keys:
//     - name: alice                      # [A-Za-z0-9_.-]+, unique; metrics and logs show this
//       key: sk-alice-7f3c...            # the bearer token, unique, at least 8 characters
//       role: admin                      # admin or user (default); admin routes need admin
//       max_concurrent_requests: 4       # optional; 0 or absent: unlimited
//       tokens_per_minute: 200000        # optional; prompt + completion, sliding 60 s
//
// Keys of --api-key / TOKENMILL_API_KEY stay as they were: admin, unlimited, named "api-key-1", ...
// The KeyStore holds both; reload() reads the file again and swaps the whole set at once (a broken
// file keeps the keys it had). A key's limiter lives by its name, so a reload keeps its running
// count and token window. Nothing here puts a key in an error message or a log line.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "server/rate_limit.h"

namespace tmill::server {

enum class KeyRole { User, Admin };
const char* key_role_name(KeyRole r);

struct ApiKeyEntry {
  std::string name;
  std::string key;
  KeyRole role = KeyRole::User;
  KeyLimits limits;
};

// `source` names the text in errors ("keys.yaml"). Errors name the entry (by name or position) and
// line, never the key.
Result<std::vector<ApiKeyEntry>> parse_api_key_file(const std::string& text, const std::string& source);
Result<std::vector<ApiKeyEntry>> load_api_key_file(const std::string& path);

// The key a request authenticated with.
struct KeyIdentity {
  std::string name;
  KeyRole role = KeyRole::Admin;
  std::shared_ptr<KeyLimiter> limiter;  // null: no limits
  bool from_file = false;
};

class KeyStore {
 public:
  // `cli_keys`: --api-key values; `file`: --api-key-file ("" none). Errors: the file's.
  static Result<std::unique_ptr<KeyStore>> create(std::vector<std::string> cli_keys, std::string file);

  // True when requests must carry a key.
  bool enabled() const;
  // True when a key file is in use (admin routes then need an admin key).
  bool has_file() const { return !file_.empty(); }
  const std::string& file() const { return file_; }
  // The key whose token `token` is (compared in constant time against every key), or null.
  std::shared_ptr<const KeyIdentity> find(std::string_view token) const;
  // Reads the file again; on success the new set replaces the old one at once. Returns the number
  // of keys now loaded; an error leaves the old set in place.
  Result<size_t> reload();
  size_t size() const;
  std::vector<std::string> names() const;

 private:
  struct Set {
    std::vector<std::string> keys;  // parallel to ids
    std::vector<std::shared_ptr<const KeyIdentity>> ids;
  };
  KeyStore() = default;
  std::shared_ptr<const Set> build(const std::vector<ApiKeyEntry>& file_keys);

  std::vector<std::string> cli_keys_;
  std::string file_;
  mutable std::mutex mu_;
  std::shared_ptr<const Set> set_;
  std::unordered_map<std::string, std::shared_ptr<KeyLimiter>> limiters_;  // by name, kept across reloads
};

}  // namespace tmill::server
