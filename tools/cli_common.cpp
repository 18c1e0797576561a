#include "cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "core/strings.h"

namespace tmill::cli {

std::vector<CommandDef>& command_registry() {
  static std::vector<CommandDef> r;
  return r;
}

std::string default_model_path() {
  namespace fs = std::filesystem;
  if (const char* e = std::getenv("TOKENMILL_DEFAULT_MODEL"); e && *e) return e;
  const fs::path rel = fs::path("models") / "stories260K" / "stories260K.gguf";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::exists(dir / rel, ec)) return (dir / rel).string();
      if (fs::exists(dir / "share" / "tokenmill" / rel, ec)) return (dir / "share" / "tokenmill" / rel).string();
      if (dir == dir.root_path()) break;
    }
  }
  return (fs::path(TM_SOURCE_DIR) / rel).string();
}

std::string version_string() { return TM_VERSION; }

Result<std::vector<int32_t>> parse_token_ids(const std::string& text, int64_t n_vocab) {
  std::string s;
  for (char c : text) s += (c == '[' || c == ']' || c == ' ' || c == '\n') ? ',' : c;
  std::vector<int32_t> ids;
  for (const auto& part : split(s, ',')) {
    if (part.empty()) continue;
    char* end = nullptr;
    const long v = std::strtol(part.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v >= n_vocab)
      return Error{fmt::format("bad token id '{}' (vocabulary has {} tokens)", part, n_vocab)};
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace tmill::cli
