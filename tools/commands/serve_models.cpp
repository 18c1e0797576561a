#include "serve_models.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "core/log.h"
#include "server/server.h"
#include "core/memory.h"
#include "core/strings.h"

namespace tmill::cli {

namespace {

std::string stem_name(const std::string& path) { return server::default_model_name(path); }

}  // namespace

Result<std::vector<ServeModel>> models_from_cli(const std::vector<std::string>& entries, const EngineCli& base) {
  std::vector<ServeModel> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    if (std::find(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(i), e) != entries.begin() + static_cast<std::ptrdiff_t>(i))
      continue;  // the same text twice (MODEL and --model MODEL) is one model
    ServeModel m;
    m.engine = base;
    const size_t eq = e.find('=');
    std::error_code ec;
    if (eq != std::string::npos && e.substr(0, eq).find('/') == std::string::npos &&
        !std::filesystem::exists(e, ec)) {
      m.spec.name = e.substr(0, eq);
      m.spec.path = e.substr(eq + 1);
      if (m.spec.name.empty()) return Error{"--model '" + e + "': the name before '=' is empty"};
      if (m.spec.path.empty()) return Error{"--model '" + e + "': the file after '=' is empty"};
    } else {
      m.spec.path = e;
      m.spec.name = stem_name(e);
    }
    m.engine.model = m.spec.path;
    for (const auto& o : out)
      if (o.spec.name == m.spec.name)
        return Error{fmt::format("two models are named '{}' ({} and {}); name them: --model NAME=FILE", m.spec.name,
                                 o.spec.path, m.spec.path)};
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<ServeModel>> models_from_file(const server::ModelsFile& file, const EngineCli& base) {
  std::vector<ServeModel> out;
  for (const auto& e : file.models) {
    ServeModel m;
    m.spec = e.spec;
    m.engine = base;
    m.engine.model = e.spec.path;
    if (e.engine.threads) m.engine.threads = *e.engine.threads;
    if (e.engine.kv_cache_memory) m.engine.kv_cache_memory = *e.engine.kv_cache_memory;
    if (e.engine.kv_cache_dtype) m.engine.kv_cache_dtype = *e.engine.kv_cache_dtype;
    if (e.engine.max_model_len) m.engine.max_model_len = *e.engine.max_model_len;
    if (e.engine.max_num_seqs) m.engine.max_num_seqs = *e.engine.max_num_seqs;
    if (e.engine.max_loras) m.engine.max_loras = *e.engine.max_loras;
    if (e.engine.pooling) m.engine.pooling = *e.engine.pooling;
    out.push_back(std::move(m));
  }
  return out;
}

void apply_thread_policy(std::vector<ServeModel>& models, bool threads_given) {
  if (models.size() < 2) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int claimed = 0, unset = 0;
  for (const auto& m : models) {
    if (m.engine.threads > 0) claimed += m.engine.threads;
    else if (!threads_given) ++unset;
  }
  // The cores the models with explicit threads leave, shared evenly by the others (at least one each).
  const int share = unset ? std::max(1, (cores - std::min(claimed, cores)) / unset) : 0;
  int total = 0;
  for (auto& m : models) {
    if (m.engine.threads <= 0 && !threads_given) m.engine.threads = share;
    total += m.engine.threads > 0 ? m.engine.threads : cores;
  }
  if (total > cores)
    log_warn("the models' threads add up to {} on {} cores: engines running at once will compete for them", total,
             cores);
}

Result<uint64_t> parse_memory_limit(const std::string& s) {
  if (s == "0" || s == "none") return uint64_t{0};
  if (!s.empty() && s.back() == '%') {
    double pct = 0;
    try {
      pct = std::stod(s.substr(0, s.size() - 1));
    } catch (...) {
      return Error{"--memory-limit: '" + s + "' is not a percentage"};
    }
    if (!(pct > 0 && pct <= 100)) return Error{"--memory-limit: a percentage must be in (0, 100]"};
    const uint64_t total = meminfo_bytes("MemTotal");
    if (total == 0) return Error{"--memory-limit: cannot read the memory size (/proc/meminfo)"};
    return static_cast<uint64_t>(static_cast<double>(total) * pct / 100.0);
  }
  auto b = parse_size(s);
  if (!b.ok()) return Error{"--memory-limit: " + b.error()};
  return *b;
}

uint64_t default_memory_limit() { return meminfo_bytes("MemTotal") / 10 * 9; }

Status size_models(std::vector<ServeModel>& models) {
  for (auto& m : models) {
    auto bytes = estimate_model_bytes(m.spec.path, load_options(m.engine));  // a GGUF's size; a folder's weights as they will load
    if (!bytes.ok()) return Error{fmt::format("model {}: cannot read {}: {}", m.spec.name, m.spec.path, bytes.error())};
    m.spec.file_bytes = *bytes;
    m.spec.max_model_len = m.engine.max_model_len;
    if (!m.engine.kv_cache_memory.empty()) {
      auto kv = parse_kv_cache_memory(m.engine.kv_cache_memory);
      if (!kv.ok()) return Error{fmt::format("model {}: kv_cache_memory: {}", m.spec.name, kv.error())};
      m.spec.kv_bytes = *kv;
    }
  }
  return {};
}

}  // namespace tmill::cli
