#include "convert/imatrix_file.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/mmap.h"
#include "formats/gguf.h"

namespace tmill {
namespace {

constexpr const char* kSumSuffix = ".in_sum2";
constexpr const char* kCountSuffix = ".counts";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<float> f32_data(const GgufTensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

Result<Imatrix> load_gguf_imatrix(const std::string& path) {
  TM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  Imatrix m;
  if (auto t = f.get_string("general.type"); t && *t != "imatrix")
    return Error{fmt::format("{}: general.type is '{}', not 'imatrix'", path, *t)};
  if (const GgufValue* v = f.find("imatrix.datasets")) {
    if (const auto* a = v->as_string_array()) m.datasets = *a;
    else if (const auto* s = v->as_string()) m.datasets = {*s};
  }
  m.chunk_count = f.get_int("imatrix.chunk_count").value_or(0);
  m.chunk_size = f.get_int("imatrix.chunk_size").value_or(0);
  for (const GgufTensorInfo& t : f.tensors()) {
    std::string base;
    bool is_sum = false;
    if (ends_with(t.name, kSumSuffix)) {
      base = t.name.substr(0, t.name.size() - std::strlen(kSumSuffix));
      is_sum = true;
    } else if (ends_with(t.name, kCountSuffix)) {
      base = t.name.substr(0, t.name.size() - std::strlen(kCountSuffix));
    } else {
      continue;  // in_sum, in_sum4, ... statistics we do not use
    }
    if (t.type != DType::F32) return Error{fmt::format("{}: tensor '{}' is {}, expected F32", path, t.name, dtype_name(t.type))};
    auto data = f32_data(t);
    for (float x : data)
      if (!std::isfinite(x)) return Error{fmt::format("{}: tensor '{}' holds a non-finite value", path, t.name)};
    (is_sum ? m.entries[base].sums : m.entries[base].counts) = std::move(data);
  }
  for (auto it = m.entries.begin(); it != m.entries.end(); ++it) {
    const ImatrixEntry& e = it->second;
    if (e.counts.empty() || e.sums.empty() || e.sums.size() % e.counts.size() != 0)
      return Error{fmt::format("{}: entry '{}' has {} sums for {} counts", path, it->first, e.sums.size(),
                               e.counts.size())};
  }
  return m;
}

// llama.cpp's legacy format: i32 n_entries, then per entry i32 name_len, name, i32 ncall, i32 nval,
// f32 values[nval] (sums over ncall calls); optionally i32 last_chunk, i32 len, dataset name.
Result<Imatrix> load_legacy_imatrix(const std::string& path, const std::string& bytes) {
  size_t pos = 0;
  auto read_i32 = [&](int32_t* v) {
    if (bytes.size() - pos < 4) return false;
    std::memcpy(v, bytes.data() + pos, 4);
    pos += 4;
    return true;
  };
  auto bad = [&](const char* what) { return Error{fmt::format("{}: not an imatrix file ({})", path, what)}; };
  int32_t n = 0;
  if (!read_i32(&n) || n < 0) return bad("bad entry count");
  Imatrix m;
  for (int32_t i = 0; i < n; ++i) {
    int32_t len = 0, ncall = 0, nval = 0;
    if (!read_i32(&len) || len <= 0 || static_cast<size_t>(len) > bytes.size() - pos) return bad("bad name");
    std::string name = bytes.substr(pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    if (!read_i32(&ncall) || !read_i32(&nval) || nval <= 0) return bad("bad entry header");
    if ((bytes.size() - pos) / 4 < static_cast<size_t>(nval)) return bad("truncated values");
    ImatrixEntry e;
    e.sums.resize(static_cast<size_t>(nval));
    std::memcpy(e.sums.data(), bytes.data() + pos, e.sums.size() * 4);
    pos += e.sums.size() * 4;
    for (float x : e.sums)
      if (!std::isfinite(x)) return Error{fmt::format("{}: entry '{}' holds a non-finite value", path, name)};
    // A non-positive call count means the values are already means: count 1 keeps them as they are.
    e.counts = {ncall > 0 ? static_cast<float>(ncall) : 1.0f};
    m.entries[name] = std::move(e);
  }
  int32_t last_chunk = 0, dlen = 0;
  if (read_i32(&last_chunk)) {
    m.chunk_count = last_chunk;
    if (read_i32(&dlen) && dlen > 0 && static_cast<size_t>(dlen) <= bytes.size() - pos)
      m.datasets.push_back(bytes.substr(pos, static_cast<size_t>(dlen)));
  }
  return m;
}

}  // namespace

Result<Imatrix> load_imatrix(const std::string& path) {
  TM_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return load_gguf_imatrix(path);
  return load_legacy_imatrix(path, bytes);
}

Status save_imatrix(const Imatrix& m, const std::string& path) {
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  w.set("imatrix.datasets", GgufValue::string_array(m.datasets));
  w.set_u32("imatrix.chunk_count", static_cast<uint32_t>(m.chunk_count));
  w.set_u32("imatrix.chunk_size", static_cast<uint32_t>(m.chunk_size));
  for (const auto& [name, e] : m.entries) {
    const auto n_mat = static_cast<int64_t>(e.counts.size());
    if (n_mat == 0 || e.sums.empty() || e.sums.size() % e.counts.size() != 0)
      return Error{fmt::format("imatrix entry '{}' has {} sums for {} counts", name, e.sums.size(), e.counts.size())};
    TM_TRY(w.add_tensor(name + kSumSuffix, DType::F32, {e.n_cols(), n_mat}, e.sums.data()));
    TM_TRY(w.add_tensor(name + kCountSuffix, DType::F32, {1, n_mat}, e.counts.data()));
  }
  return w.write(path);
}

}  // namespace tmill
