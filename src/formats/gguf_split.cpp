#include "formats/gguf_split.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

namespace tmill {

std::optional<std::vector<std::string>> gguf_split_paths(const std::string& path) {
  // the name ends in "-NNNNN-of-MMMMM.gguf" (20 characters)
  const size_t n = path.size();
  if (n < 20 || path.compare(n - 5, 5, ".gguf") != 0) return std::nullopt;
  const std::string tail = path.substr(n - 20, 15);  // "-NNNNN-of-MMMMM"
  if (tail[0] != '-' || tail.compare(6, 4, "-of-") != 0) return std::nullopt;
  auto digits = [](const std::string& s) {
    for (char c : s)
      if (c < '0' || c > '9') return false;
    return true;
  };
  const std::string no = tail.substr(1, 5), count = tail.substr(10, 5);
  if (!digits(no) || !digits(count)) return std::nullopt;
  const int k = std::stoi(no), m = std::stoi(count);
  if (m < 2 || k < 1 || k > m) return std::nullopt;
  const std::string prefix = path.substr(0, n - 20);
  std::vector<std::string> out;
  for (int i = 1; i <= m; ++i) out.push_back(fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, i, m));
  return out;
}

Result<std::vector<GgufFile>> open_gguf_split(const std::string& path) {
  auto paths = gguf_split_paths(path);
  if (!paths) return Error{fmt::format("{}: not a split GGUF name (PREFIX-00001-of-0000N.gguf)", path)};
  std::vector<GgufFile> shards;
  std::set<std::string> names;
  int64_t tensors = 0;
  for (size_t i = 0; i < paths->size(); ++i) {
    const std::string& p = (*paths)[i];
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec))
      return Error{fmt::format("split GGUF {}: shard {} of {} is missing: {}", path, i + 1, paths->size(), p)};
    TM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(p));
    const auto no = f.get_int("split.no"), count = f.get_int("split.count");
    if (!no || !count)
      return Error{fmt::format("{}: no split.no / split.count metadata: not a shard of a split GGUF", p)};
    if (*no != static_cast<int64_t>(i) || *count != static_cast<int64_t>(paths->size()))
      return Error{fmt::format("{}: split.no {} / split.count {} do not match its name (shard {} of {})", p, *no,
                               *count, i + 1, paths->size())};
    for (const auto& t : f.tensors())
      if (!names.insert(t.name).second) return Error{fmt::format("{}: tensor {} is also in an earlier shard", p, t.name)};
    tensors += static_cast<int64_t>(f.tensors().size());
    shards.push_back(std::move(f));
  }
  if (auto want = shards[0].get_int("split.tensors.count"); want && *want != tensors)
    return Error{fmt::format("split GGUF {}: split.tensors.count is {} but the {} shards hold {} tensors", path, *want,
                             shards.size(), tensors)};
  return shards;
}

}  // namespace tmill
