#include "server/generation_config.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/mmap.h"

namespace tmill::server {

Status overlay_generation_json(const std::string& text, const std::string& path, GenerationDefaults& d) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{fmt::format("{}: not a JSON object", path)};
  auto number = [&](const char* key, std::optional<float>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status{};
    if (!it->is_number()) return Error{fmt::format("{}: '{}' must be a number", path, key)};
    out = it->get<float>();
    return Status{};
  };
  auto integer = [&](const char* key, std::optional<int32_t>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status{};
    if (!it->is_number_integer()) return Error{fmt::format("{}: '{}' must be an integer", path, key)};
    out = it->get<int32_t>();
    return Status{};
  };
  TM_TRY(number("temperature", d.temperature));
  TM_TRY(number("top_p", d.top_p));
  TM_TRY(number("min_p", d.min_p));
  TM_TRY(number("repetition_penalty", d.repetition_penalty));
  TM_TRY(integer("top_k", d.top_k));
  TM_TRY(integer("max_new_tokens", d.max_tokens));
  return Status{};
}

namespace {

// Overlays the vLLM keys of a generation_config.json file onto d.
Status read_json(const std::string& path, GenerationDefaults& d) {
  auto text = read_file(path);
  if (!text.ok()) return Error{fmt::format("{}: {}", path, text.error())};
  return overlay_generation_json(*text, path, d);
}

}  // namespace

Result<GenerationDefaults> load_generation_defaults(const std::string& mode, const std::string& model_path,
                                                    const ModelInfo& info) {
  namespace fs = std::filesystem;
  GenerationDefaults d;
  if (mode == "vllm") return d;
  std::error_code ec;
  if (mode == "auto" || mode.empty()) {
    d = info.generation_defaults;
    const fs::path p(model_path);
    const fs::path dir = fs::is_directory(p, ec) ? p : p.parent_path();
    const fs::path beside = dir / "generation_config.json";
    if (!model_path.empty() && fs::is_regular_file(beside, ec)) TM_TRY(read_json(beside.string(), d));
    return d;
  }
  const fs::path given(mode);
  const fs::path file = fs::is_directory(given, ec) ? given / "generation_config.json" : given;
  if (!fs::is_regular_file(file, ec))
    return Error{fmt::format("--generation-config {}: no generation_config.json there (give auto, vllm, or a folder "
                             "holding generation_config.json)",
                             mode)};
  TM_TRY(read_json(file.string(), d));
  return d;
}

std::string describe(const GenerationDefaults& d) {
  std::string s;
  auto add = [&](const char* k, const std::string& v) { s += (s.empty() ? "" : ", ") + std::string(k) + " " + v; };
  if (d.temperature) add("temperature", fmt::format("{:g}", *d.temperature));
  if (d.top_p) add("top_p", fmt::format("{:g}", *d.top_p));
  if (d.top_k) add("top_k", std::to_string(*d.top_k));
  if (d.min_p) add("min_p", fmt::format("{:g}", *d.min_p));
  if (d.repetition_penalty) add("repetition_penalty", fmt::format("{:g}", *d.repetition_penalty));
  if (d.max_tokens) add("max_tokens", std::to_string(*d.max_tokens));
  return s;
}

}  // namespace tmill::server
