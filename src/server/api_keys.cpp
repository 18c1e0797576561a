#include "server/api_keys.h"

#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/mmap.h"
#include "server/auth.h"

namespace tmill::server {

const char* key_role_name(KeyRole r) { return r == KeyRole::Admin ? "admin" : "user"; }

namespace {

struct FileError {
  std::string message;
};

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
          c == '.'))
      return false;
  return true;
}

// Printable ASCII without spaces: what "Authorization: Bearer KEY" carries unchanged.
bool valid_key(const std::string& k) {
  if (k.size() < 8 || k.size() > 512) return false;
  for (char c : k)
    if (c < 0x21 || c > 0x7E) return false;
  return true;
}

class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& n, const std::string& what) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) throw FileError{fmt::format("{}: {}", source_, what)};
    throw FileError{fmt::format("{}:{}:{}: {}", source_, m.line + 1, m.column + 1, what)};
  }

  int64_t limit(const YAML::Node& n, const std::string& where, const char* key) const {
    int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v) || v < 0)
      fail(n, fmt::format("{}: '{}' must be a whole number >= 0 (0: unlimited)", where, key));
    return v;
  }

  std::vector<ApiKeyEntry> file(const YAML::Node& root) const {
    if (!root.IsMap() || !root["keys"]) fail(root, "expected a mapping with 'keys:' (a list of {name, key, role})");
    for (const auto& kv : root)
      if (kv.first.as<std::string>() != "keys")
        fail(kv.first, fmt::format("unknown key '{}' at the top (known: keys)", kv.first.as<std::string>()));
    const YAML::Node& list = root["keys"];
    if (!list.IsSequence()) fail(list, "'keys' must be a list of {name, key, role, ...}");
    std::vector<ApiKeyEntry> out;
    std::set<std::string> names, keys;
    size_t i = 0;
    for (const auto& n : list) {
      ++i;
      std::string where = fmt::format("key #{}", i);
      if (!n.IsMap()) fail(n, where + " must be a mapping {name, key, role, ...}");
      ApiKeyEntry e;
      if (n["name"]) {
        if (!n["name"].IsScalar()) fail(n["name"], where + ": 'name' must be a string");
        e.name = n["name"].as<std::string>();
        where = fmt::format("key '{}'", e.name);
      }
      for (const auto& kv : n) {
        const std::string k = kv.first.as<std::string>();
        if (k != "name" && k != "key" && k != "role" && k != "max_concurrent_requests" && k != "tokens_per_minute")
          fail(kv.first, fmt::format("{}: unknown key '{}' (known: name, key, role, max_concurrent_requests, "
                                     "tokens_per_minute)",
                                     where, k));
      }
      if (!valid_name(e.name))
        fail(n, fmt::format("{}: 'name' is required: 1 to 64 of A-Z a-z 0-9 _ . -", where));
      if (!names.insert(e.name).second) fail(n, fmt::format("two keys are named '{}'", e.name));
      if (!n["key"] || !n["key"].IsScalar()) fail(n, where + ": 'key' (the bearer token) is required");
      e.key = n["key"].as<std::string>();
      if (!valid_key(e.key))
        fail(n["key"], where + ": 'key' must be 8 to 512 printable ASCII characters without spaces");
      if (!keys.insert(e.key).second) fail(n["key"], where + ": the same key is given to another entry");
      if (n["role"]) {
        const std::string r = n["role"].IsScalar() ? n["role"].as<std::string>() : "";
        if (r == "admin") e.role = KeyRole::Admin;
        else if (r == "user") e.role = KeyRole::User;
        else fail(n["role"], where + ": 'role' must be admin or user");
      }
      if (n["max_concurrent_requests"])
        e.limits.max_concurrent_requests = limit(n["max_concurrent_requests"], where, "max_concurrent_requests");
      if (n["tokens_per_minute"]) e.limits.tokens_per_minute = limit(n["tokens_per_minute"], where, "tokens_per_minute");
      out.push_back(std::move(e));
    }
    return out;
  }

 private:
  std::string source_;
};

}  // namespace

Result<std::vector<ApiKeyEntry>> parse_api_key_file(const std::string& text, const std::string& source) {
  try {
    const YAML::Node root = YAML::Load(text);
    return Parser(source).file(root);
  } catch (const FileError& e) {
    return Error{e.message};
  } catch (const YAML::Exception& e) {
    // yaml-cpp's messages name the problem and its place, never the text at it.
    return Error{fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg)};
  }
}

Result<std::vector<ApiKeyEntry>> load_api_key_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return Error{text.error()};
  return parse_api_key_file(*text, path);
}

Result<std::unique_ptr<KeyStore>> KeyStore::create(std::vector<std::string> cli_keys, std::string file) {
  for (const auto& k : cli_keys)
    if (k.empty()) return Error{"--api-key must not be empty"};
  auto s = std::unique_ptr<KeyStore>(new KeyStore());
  s->cli_keys_ = std::move(cli_keys);
  s->file_ = std::move(file);
  std::vector<ApiKeyEntry> entries;
  if (!s->file_.empty()) {
    auto loaded = load_api_key_file(s->file_);
    if (!loaded.ok()) return Error{"--api-key-file: " + loaded.error()};
    entries = std::move(loaded).value();
  }
  for (const auto& e : entries)
    for (const auto& k : s->cli_keys_)
      if (constant_time_equals(e.key, k))
        return Error{fmt::format("{}: the key of '{}' is also given with --api-key", s->file_, e.name)};
  std::lock_guard<std::mutex> lock(s->mu_);
  s->set_ = s->build(entries);
  return s;
}

// Under mu_: the identities of the CLI keys and the file's, reusing each name's limiter.
std::shared_ptr<const KeyStore::Set> KeyStore::build(const std::vector<ApiKeyEntry>& file_keys) {
  auto set = std::make_shared<Set>();
  for (size_t i = 0; i < cli_keys_.size(); ++i) {
    auto id = std::make_shared<KeyIdentity>();
    id->name = fmt::format("api-key-{}", i + 1);
    id->role = KeyRole::Admin;
    set->keys.push_back(cli_keys_[i]);
    set->ids.push_back(std::move(id));
  }
  std::unordered_map<std::string, std::shared_ptr<KeyLimiter>> kept;
  for (const ApiKeyEntry& e : file_keys) {
    auto id = std::make_shared<KeyIdentity>();
    id->name = e.name;
    id->role = e.role;
    id->from_file = true;
    auto it = limiters_.find(e.name);
    std::shared_ptr<KeyLimiter> lim = it != limiters_.end() ? it->second : std::make_shared<KeyLimiter>();
    lim->set_limits(e.limits);
    kept[e.name] = lim;
    if (e.limits.any()) id->limiter = lim;
    set->keys.push_back(e.key);
    set->ids.push_back(std::move(id));
  }
  limiters_ = std::move(kept);
  return set;
}

bool KeyStore::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !set_->keys.empty() || !file_.empty();
}

std::shared_ptr<const KeyIdentity> KeyStore::find(std::string_view token) const {
  std::shared_ptr<const Set> set;
  {
    std::lock_guard<std::mutex> lock(mu_);
    set = set_;
  }
  if (token.empty()) return nullptr;
  // Every key is compared, whichever matches (no early exit).
  size_t found = set->keys.size();
  for (size_t i = 0; i < set->keys.size(); ++i) {
    const bool eq = constant_time_equals(token, set->keys[i]);
    found = eq && found == set->keys.size() ? i : found;
  }
  return found < set->keys.size() ? set->ids[found] : nullptr;
}

Result<size_t> KeyStore::reload() {
  if (file_.empty()) return Error{"no --api-key-file to reload"};
  TM_ASSIGN_OR_RETURN(auto entries, load_api_key_file(file_));
  for (const auto& e : entries)
    for (const auto& k : cli_keys_)
      if (constant_time_equals(e.key, k))
        return Error{fmt::format("{}: the key of '{}' is also given with --api-key", file_, e.name)};
  std::lock_guard<std::mutex> lock(mu_);
  set_ = build(entries);
  return set_->keys.size();
}

size_t KeyStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_->keys.size();
}

std::vector<std::string> KeyStore::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& id : set_->ids) out.push_back(id->name);
  return out;
}

}  // namespace tmill::server
