#include "formats/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/fp16.h"

namespace tmill {
namespace {

using ojson = nlohmann::ordered_json;

// The reference implementation refuses headers above 100 MB; real ones are a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxRank = 8;

struct DTypeName {
  StDType t;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {
    {StDType::F64, "F64", 8},   {StDType::F32, "F32", 4},         {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I64, "I64", 8},         {StDType::I32, "I32", 4},
    {StDType::I16, "I16", 2},   {StDType::I8, "I8", 1},           {StDType::U64, "U64", 8},
    {StDType::U32, "U32", 4},   {StDType::U16, "U16", 2},         {StDType::U8, "U8", 1},
    {StDType::BOOL, "BOOL", 1}, {StDType::F8_E4M3, "F8_E4M3", 1}, {StDType::F8_E5M2, "F8_E5M2", 1},
};

const DTypeName* dtype_by_name(const std::string& s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<uint64_t> as_u64(const ojson& v, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    return Error{fmt::format("{} must be a non-negative integer, got {}", what, v.dump())};
  return v.get<uint64_t>();
}

Status parse_tensor(const std::string& name, const ojson& e, uint64_t data_size, SafetensorsTensor* t) {
  t->name = name;
  const std::string where = fmt::format("tensor '{}'", name);
  if (!e.is_object()) return Error{fmt::format("{}: entry is not a JSON object", where)};
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) return Error{fmt::format("{}: missing or non-string \"dtype\"", where)};
  if (sh == e.end() || !sh->is_array()) return Error{fmt::format("{}: missing or non-array \"shape\"", where)};
  if (off == e.end() || !off->is_array() || off->size() != 2)
    return Error{fmt::format("{}: \"data_offsets\" must be an array [begin, end]", where)};
  const DTypeName* d = dtype_by_name(dt->get<std::string>());
  if (!d) return Error{fmt::format("{}: unknown dtype '{}'", where, dt->get<std::string>())};
  t->dtype = d->t;
  if (sh->size() > kMaxRank) return Error{fmt::format("{}: rank {} is too large", where, sh->size())};
  uint64_t n = 1;
  for (const auto& dim : *sh) {
    TM_ASSIGN_OR_RETURN(uint64_t v, as_u64(dim, where + ": shape dimension"));
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(n, v, &n) ||
        n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Error{fmt::format("{}: element count of shape {} overflows", where, sh->dump())};
    t->shape.push_back(static_cast<int64_t>(v));
  }
  t->n_elements = static_cast<int64_t>(n);
  uint64_t nbytes;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(d->size), &nbytes))
    return Error{fmt::format("{}: byte size of shape {} overflows", where, sh->dump())};
  TM_ASSIGN_OR_RETURN(t->begin, as_u64((*off)[0], where + ": data_offsets begin"));
  TM_ASSIGN_OR_RETURN(t->end, as_u64((*off)[1], where + ": data_offsets end"));
  if (t->end < t->begin)
    return Error{fmt::format("{}: data_offsets end {} is before begin {}", where, t->end, t->begin)};
  if (t->end > data_size)
    return Error{fmt::format("{}: data_offsets [{}, {}) run past the end of the data section ({} bytes)", where,
                             t->begin, t->end, data_size)};
  if (t->end - t->begin != nbytes)
    return Error{fmt::format("{}: data_offsets cover {} bytes but {} {} needs {}", where, t->end - t->begin,
                             sh->dump(), d->name, nbytes)};
  return {};
}

}  // namespace

const char* st_dtype_name(StDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.name;
  return "?";
}

size_t st_dtype_size(StDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.size;
  return 0;
}

// ---- SafetensorsFile ----

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mf = MappedFile::open(path);
  if (!mf.ok()) return mf.error_value();
  auto shared = std::make_shared<const MappedFile>(std::move(mf).value());
  auto r = parse(shared->data(), shared->size(), path);
  if (!r.ok()) return r.error_value();
  SafetensorsFile f = std::move(r).value();
  f.file_ = std::move(shared);
  return f;
}

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  auto fail = [&](const std::string& msg) { return Error{fmt::format("{}: {}", name, msg)}; };
  SafetensorsFile f;
  f.path_ = name;
  if (size < 8) return fail("not a safetensors file: too short for the 8-byte header length");
  uint64_t hlen;
  std::memcpy(&hlen, data, 8);
  if (hlen > kMaxHeaderBytes) return fail(fmt::format("absurd header length {} (limit {})", hlen, kMaxHeaderBytes));
  if (hlen > size - 8)
    return fail(fmt::format("truncated file: header length {} runs past the end of the file ({} bytes)", hlen, size));
  if (hlen < 2) return fail("header is not a JSON object");
  f.data_offset_ = 8 + hlen;
  const uint64_t data_size = size - f.data_offset_;
  const char* hb = reinterpret_cast<const char*>(data + 8);

  // Duplicate top-level keys would silently overwrite each other in the DOM; catch them while parsing.
  std::set<std::string> seen;
  std::string duplicate;
  auto cb = [&](int depth, ojson::parse_event_t ev, ojson& parsed) {
    if (depth == 1 && ev == ojson::parse_event_t::key && duplicate.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second) duplicate = k;
    }
    return true;
  };
  ojson h;
  try {
    h = ojson::parse(hb, hb + hlen, cb);
  } catch (const std::exception& e) {
    return fail(fmt::format("bad JSON header: {}", e.what()));
  }
  if (!h.is_object()) return fail("header is not a JSON object");
  if (!duplicate.empty()) return fail(fmt::format("duplicate tensor name '{}' in the header", duplicate));

  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return fail("__metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) return fail(fmt::format("__metadata__ value of '{}' is not a string", m.key()));
        f.metadata_.emplace_back(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    SafetensorsTensor t;
    Status st = parse_tensor(it.key(), it.value(), data_size, &t);
    if (!st.ok()) return fail(st.error());
    t.data = data + f.data_offset_ + t.begin;
    f.index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // No two tensors may share bytes.
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : f.tensors_)
    if (t.nbytes() > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      return fail(fmt::format("tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}))", by_offset[i - 1]->name,
                              by_offset[i]->name, by_offset[i - 1]->begin, by_offset[i - 1]->end, by_offset[i]->begin,
                              by_offset[i]->end));
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::read_f32(const SafetensorsTensor& t, uint64_t first, uint64_t count, float* out) const {
  if (!st_dtype_is_float(t.dtype) && !st_dtype_is_fp8(t.dtype) && t.dtype != StDType::I8)
    return Error{fmt::format("{}: tensor '{}': unsupported dtype {} (F32, F16, BF16, FP8 and I8 are read as floats)",
                             path_, t.name, st_dtype_name(t.dtype))};
  if (first > static_cast<uint64_t>(t.n_elements) || count > static_cast<uint64_t>(t.n_elements) - first)
    return Error{fmt::format("{}: tensor '{}': element range [{}, +{}) is out of bounds", path_, t.name, first, count)};
  const uint8_t* p = t.data;
  switch (t.dtype) {
    case StDType::F32: std::memcpy(out, p + first * 4, count * 4); break;
    case StDType::F8_E4M3:
      for (uint64_t i = 0; i < count; ++i) out[i] = fp8_e4m3_to_fp32(p[first + i]);
      break;
    case StDType::F8_E5M2:
      for (uint64_t i = 0; i < count; ++i) out[i] = fp8_e5m2_to_fp32(p[first + i]);
      break;
    case StDType::I8:  // (INT8 checkpoints' codes, scaled by the caller)
      for (uint64_t i = 0; i < count; ++i) out[i] = static_cast<float>(static_cast<int8_t>(p[first + i]));
      break;
    case StDType::F16:
      for (uint64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + (first + i) * 2, 2);
        out[i] = fp16_to_fp32(h);
      }
      break;
    default:  // BF16
      for (uint64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + (first + i) * 2, 2);
        out[i] = bf16_to_fp32(h);
      }
      break;
  }
  return {};
}

// ---- SafetensorsModel ----

Result<SafetensorsModel> SafetensorsModel::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsModel m;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single_path = (fs::path(dir) / "model.safetensors").string();
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;  // tensor -> shard (from the index)
  if (file_exists(index_path)) {
    m.sharded_ = true;
    TM_ASSIGN_OR_RETURN(std::string text, read_file(index_path));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Error{fmt::format("{}: not a JSON object", index_path)};
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object() || wm->empty())
      return Error{fmt::format("{}: missing or empty \"weight_map\" object", index_path)};
    std::set<std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string()) return Error{fmt::format("{}: weight_map['{}'] is not a string", index_path, it.key())};
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        return Error{fmt::format("{}: weight_map['{}'] = '{}' is not a file name in the model folder", index_path,
                                 it.key(), shard)};
      shards.insert(shard);
      weight_map[it.key()] = shard;
    }
    shard_names.assign(shards.begin(), shards.end());
  } else if (file_exists(single_path)) {
    shard_names.push_back("model.safetensors");
  } else {
    std::string hint;
    if (file_exists((fs::path(dir) / "pytorch_model.bin").string()))
      hint = " (PyTorch .bin checkpoints are not supported: save the model with safetensors)";
    return Error{fmt::format("'{}' has neither model.safetensors nor model.safetensors.index.json{}", dir, hint)};
  }

  for (const auto& shard : shard_names) {
    TM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open((fs::path(dir) / shard).string()));
    const size_t fi = m.files_.size();
    m.files_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
    const SafetensorsFile& file = *m.files_.back();
    std::vector<std::string> names;
    for (size_t ti = 0; ti < file.tensors().size(); ++ti) {
      const std::string& name = file.tensors()[ti].name;
      auto [it, inserted] = m.index_.emplace(name, std::make_pair(fi, ti));
      if (!inserted)
        return Error{fmt::format("tensor '{}' is in both {} and {}", name, m.files_[it->second.first]->path(),
                                 file.path())};
      if (m.sharded_) {
        auto w = weight_map.find(name);
        if (w != weight_map.end() && w->second != shard)
          return Error{fmt::format("{}: tensor '{}' is listed in {} but found in {}", index_path, name, w->second,
                                   file.path())};
      }
      names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    m.names_.insert(m.names_.end(), names.begin(), names.end());
  }
  for (const auto& [name, shard] : weight_map)
    if (!m.index_.count(name))
      return Error{fmt::format("{}: tensor '{}' is listed in {} but that file has no such tensor", index_path, name,
                               shard)};
  return m;
}

std::optional<SafetensorsModel::Ref> SafetensorsModel::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  const SafetensorsFile* f = files_[it->second.first].get();
  return Ref{f, &f->tensors()[it->second.second]};
}

}  // namespace tmill
