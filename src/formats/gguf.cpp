#include "formats/gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace tmill {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kMaxAlignment = 1u << 20;  // general.alignment above this is refused (1 MiB)
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxStringBytes = 1ull << 30;
// Counts read from the file are only bounded by the file size (a corrupt multi-GB model may claim
// billions of entries), so containers grow as entries are actually read, never reserved up front.
constexpr uint64_t kMaxReserve = 1024;

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

// Bounds-checked little-endian cursor over untrusted bytes.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

  template <class T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T))
      return Error{fmt::format("truncated file: unexpected end while reading {} at byte {}", what, pos_)};
    std::memcpy(out, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_bytes(size_t n, std::string* out, const char* what) {
    if (remaining() < n)
      return Error{fmt::format("truncated file: {} of {} bytes at byte {} runs past the end of the file", what, n,
                               pos_)};
    out->assign(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return {};
  }

  Status read_string(std::string* out, const char* what) {
    uint64_t len;
    TM_TRY(read(&len, what));
    if (len > kMaxStringBytes) return Error{fmt::format("{} has absurd length {}", what, len)};
    return read_bytes(static_cast<size_t>(len), out, what);
  }

  const uint8_t* here() const { return p_ + pos_; }
  void skip(size_t n) { pos_ += n; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

Status read_value(Cursor& c, GgufType type, GgufValue* out, int depth, const std::string& key) {
  out->type = type;
  if (type == GgufType::STRING) return c.read_string(&out->str, "string value");
  if (type == GgufType::ARRAY) {
    if (depth >= kMaxArrayDepth) return Error{fmt::format("key '{}': arrays nested deeper than {}", key, kMaxArrayDepth)};
    uint32_t et;
    TM_TRY(c.read(&et, "array element type"));
    if (!valid_type(et)) return Error{fmt::format("key '{}': unknown array element type {}", key, et)};
    out->elem_type = static_cast<GgufType>(et);
    TM_TRY(c.read(&out->count, "array length"));
    // Every element needs at least this many bytes, so the count is bounded by the file size.
    const uint64_t min_elem = out->elem_type == GgufType::STRING ? 8
                              : out->elem_type == GgufType::ARRAY ? 12
                                                                  : scalar_size(out->elem_type);
    if (out->count > c.remaining() / min_elem)
      return Error{fmt::format("key '{}': absurd array length {} (only {} bytes left in the file)", key, out->count,
                               c.remaining())};
    if (out->elem_type == GgufType::STRING) {
      out->strings.reserve(std::min(out->count, kMaxReserve));
      for (uint64_t i = 0; i < out->count; ++i) {
        TM_TRY(c.read_string(&out->strings.emplace_back(), "string array element"));
      }
    } else if (out->elem_type == GgufType::ARRAY) {
      out->arrays.reserve(std::min(out->count, kMaxReserve));
      for (uint64_t i = 0; i < out->count; ++i) {
        TM_TRY(read_value(c, GgufType::ARRAY, &out->arrays.emplace_back(), depth + 1, key));
      }
    } else {
      const size_t n = static_cast<size_t>(out->count) * scalar_size(out->elem_type);
      out->raw.assign(c.here(), c.here() + n);
      c.skip(n);
      if (out->elem_type == GgufType::BOOL)
        for (uint8_t b : out->raw)
          if (b > 1) return Error{fmt::format("key '{}': invalid bool value {}", key, b)};
    }
    return {};
  }
  const size_t sz = scalar_size(type);
  if (c.remaining() < sz) return Error{fmt::format("truncated file: value of key '{}' runs past the end", key)};
  std::memcpy(&out->bits, c.here(), sz);
  c.skip(sz);
  if (type == GgufType::BOOL && out->bits > 1)
    return Error{fmt::format("key '{}': invalid bool value {}", key, out->bits)};
  return {};
}

int64_t sign_extend(uint64_t bits, size_t size) {
  switch (size) {
    case 1: return static_cast<int8_t>(bits);
    case 2: return static_cast<int16_t>(bits);
    case 4: return static_cast<int32_t>(bits);
    default: return static_cast<int64_t>(bits);
  }
}

bool is_signed(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}
bool is_int_type(GgufType t) {
  return t == GgufType::U8 || t == GgufType::I8 || t == GgufType::U16 || t == GgufType::I16 || t == GgufType::U32 ||
         t == GgufType::I32 || t == GgufType::U64 || t == GgufType::I64;
}

double scalar_as_double(GgufType t, uint64_t bits) {
  if (t == GgufType::F32) {
    float f;
    uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (t == GgufType::F64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (is_signed(t)) return static_cast<double>(sign_extend(bits, scalar_size(t)));
  return static_cast<double>(bits);
}

GgufValue make_scalar(GgufType t, uint64_t bits) {
  GgufValue v;
  v.type = t;
  v.bits = bits;
  return v;
}

template <class T>
GgufValue make_array(GgufType et, const std::vector<T>& v) {
  GgufValue a;
  a.type = GgufType::ARRAY;
  a.elem_type = et;
  a.count = v.size();
  a.raw.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(a.raw.data(), v.data(), a.raw.size());
  return a;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "?";
}

// ---- GgufValue ----

GgufValue GgufValue::u8(uint8_t v) { return make_scalar(GgufType::U8, v); }
GgufValue GgufValue::i8(int8_t v) { return make_scalar(GgufType::I8, static_cast<uint8_t>(v)); }
GgufValue GgufValue::u16(uint16_t v) { return make_scalar(GgufType::U16, v); }
GgufValue GgufValue::i16(int16_t v) { return make_scalar(GgufType::I16, static_cast<uint16_t>(v)); }
GgufValue GgufValue::u32(uint32_t v) { return make_scalar(GgufType::U32, v); }
GgufValue GgufValue::i32(int32_t v) { return make_scalar(GgufType::I32, static_cast<uint32_t>(v)); }
GgufValue GgufValue::u64(uint64_t v) { return make_scalar(GgufType::U64, v); }
GgufValue GgufValue::i64(int64_t v) { return make_scalar(GgufType::I64, static_cast<uint64_t>(v)); }
GgufValue GgufValue::f32(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return make_scalar(GgufType::F32, b);
}
GgufValue GgufValue::f64(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return make_scalar(GgufType::F64, b);
}
GgufValue GgufValue::boolean(bool v) { return make_scalar(GgufType::BOOL, v ? 1 : 0); }
GgufValue GgufValue::string(std::string v) {
  GgufValue g;
  g.type = GgufType::STRING;
  g.str = std::move(v);
  return g;
}
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::ARRAY;
  g.elem_type = GgufType::STRING;
  g.count = v.size();
  g.strings = std::move(v);
  return g;
}
GgufValue GgufValue::f32_array(const std::vector<float>& v) { return make_array(GgufType::F32, v); }
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) { return make_array(GgufType::I32, v); }
GgufValue GgufValue::u32_array(const std::vector<uint32_t>& v) { return make_array(GgufType::U32, v); }
GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  return make_array(GgufType::BOOL, bytes);
}
GgufValue GgufValue::array_of_arrays(std::vector<GgufValue> v) {
  GgufValue g;
  g.type = GgufType::ARRAY;
  g.elem_type = GgufType::ARRAY;
  g.count = v.size();
  g.arrays = std::move(v);
  return g;
}

bool GgufValue::is_integer() const { return is_int_type(type); }
bool GgufValue::is_float() const { return type == GgufType::F32 || type == GgufType::F64; }

std::optional<int64_t> GgufValue::as_int() const {
  if (type == GgufType::BOOL) return static_cast<int64_t>(bits);
  if (!is_int_type(type)) return std::nullopt;
  if (is_signed(type)) return sign_extend(bits, scalar_size(type));
  if (bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(bits);
}

std::optional<double> GgufValue::as_number() const {
  if (type == GgufType::STRING || type == GgufType::ARRAY) return std::nullopt;
  return scalar_as_double(type, bits);
}

std::optional<bool> GgufValue::as_bool() const {
  if (type != GgufType::BOOL) return std::nullopt;
  return bits != 0;
}

const std::string* GgufValue::as_string() const { return type == GgufType::STRING ? &str : nullptr; }

const std::vector<std::string>* GgufValue::as_string_array() const {
  return type == GgufType::ARRAY && elem_type == GgufType::STRING ? &strings : nullptr;
}

std::optional<std::vector<float>> GgufValue::as_f32_array() const {
  if (type != GgufType::ARRAY) return std::nullopt;
  const size_t es = scalar_size(elem_type);
  if (es == 0 || elem_type == GgufType::BOOL) return std::nullopt;
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t b = 0;
    std::memcpy(&b, raw.data() + i * es, es);
    out[i] = static_cast<float>(scalar_as_double(elem_type, b));
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufValue::as_int_array() const {
  if (type != GgufType::ARRAY || !(is_int_type(elem_type) || elem_type == GgufType::BOOL)) return std::nullopt;
  const size_t es = scalar_size(elem_type);
  std::vector<int64_t> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t b = 0;
    std::memcpy(&b, raw.data() + i * es, es);
    out[i] = is_signed(elem_type) ? sign_extend(b, es) : static_cast<int64_t>(b);
  }
  return out;
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type != o.type) return false;
  switch (type) {
    case GgufType::STRING: return str == o.str;
    case GgufType::ARRAY:
      return elem_type == o.elem_type && count == o.count && raw == o.raw && strings == o.strings &&
             arrays == o.arrays;
    default: return bits == o.bits;
  }
}

std::string GgufValue::to_display(size_t max_items) const {
  switch (type) {
    case GgufType::STRING: {
      std::string s = str.size() > 80 ? str.substr(0, 77) + "..." : str;
      for (auto& ch : s)
        if (ch == '\n') ch = ' ';
      return "\"" + s + "\"";
    }
    case GgufType::BOOL: return bits ? "true" : "false";
    case GgufType::F32: case GgufType::F64: return fmt::format("{}", scalar_as_double(type, bits));
    case GgufType::ARRAY: {
      std::string s = fmt::format("[{} x {}]", count, gguf_type_name(elem_type));
      if (count <= max_items) {
        s += " [";
        for (uint64_t i = 0; i < count; ++i) {
          if (i) s += ", ";
          if (elem_type == GgufType::STRING) s += "\"" + strings[i] + "\"";
          else if (elem_type == GgufType::ARRAY) s += arrays[i].to_display(max_items);
          else {
            const size_t es = scalar_size(elem_type);
            uint64_t b = 0;
            std::memcpy(&b, raw.data() + i * es, es);
            s += fmt::format("{}", scalar_as_double(elem_type, b));
          }
        }
        s += "]";
      }
      return s;
    }
    default:
      if (is_signed(type)) return fmt::format("{}", sign_extend(bits, scalar_size(type)));
      return fmt::format("{}", bits);
  }
}

// ---- GgufFile ----

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mf = MappedFile::open(path);
  if (!mf.ok()) return mf.error_value();
  auto shared = std::make_shared<const MappedFile>(std::move(mf).value());
  auto r = parse(shared->data(), shared->size());
  if (!r.ok()) return Error{fmt::format("{}: {}", path, r.error())};
  GgufFile f = std::move(r).value();
  f.file_ = std::move(shared);
  f.path_ = path;
  return f;
}

Result<GgufFile> GgufFile::parse(const uint8_t* data, size_t size) {
  GgufFile f;
  Cursor c(data, size);
  uint32_t magic;
  if (size < 4) return Error{"not a GGUF file: too short for the magic number"};
  TM_TRY(c.read(&magic, "magic"));
  if (magic != kMagic) return Error{"not a GGUF file: bad magic number (expected 'GGUF')"};
  TM_TRY(c.read(&f.version_, "version"));
  if (f.version_ == 1) return Error{"GGUF version 1 is not supported (only versions 2 and 3)"};
  if (f.version_ != 2 && f.version_ != 3) {
    if (f.version_ != 0 && (f.version_ & 0xffff) == 0 && (f.version_ >> 24) <= 3)
      return Error{"big-endian GGUF files are not supported"};
    return Error{fmt::format("unsupported GGUF version {} (only versions 2 and 3)", f.version_)};
  }
  uint64_t n_tensors, n_kv;
  TM_TRY(c.read(&n_tensors, "tensor count"));
  TM_TRY(c.read(&n_kv, "metadata count"));
  // A key/value pair needs >= 8+1+4+1 bytes, a tensor info >= 8+1+4+8+4+8.
  if (n_kv > c.remaining() / 14) return Error{fmt::format("absurd metadata count {}", n_kv)};
  if (n_tensors > c.remaining() / 33) return Error{fmt::format("absurd tensor count {}", n_tensors)};

  f.kv_.reserve(std::min(n_kv, kMaxReserve));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    TM_TRY(c.read_string(&key, "metadata key"));
    if (key.empty()) return Error{fmt::format("metadata key #{} is empty", i)};
    if (f.kv_index_.count(key)) return Error{fmt::format("duplicate metadata key '{}'", key)};
    uint32_t t;
    TM_TRY(c.read(&t, "metadata value type"));
    if (!valid_type(t)) return Error{fmt::format("key '{}': unknown value type {}", key, t)};
    GgufValue v;
    TM_TRY(read_value(c, static_cast<GgufType>(t), &v, 0, key));
    f.kv_index_.emplace(key, f.kv_.size());
    f.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::U32) return Error{"general.alignment must be a u32"};
    const uint64_t al = a->bits;
    if (al == 0 || (al & (al - 1)) != 0) return Error{fmt::format("general.alignment {} is not a power of two", al)};
    // Real files use 32 (the default) up to a page; a huge value only makes readers and writers of
    // the file pad by that much (a 1 GiB alignment made a re-write allocate 1 GiB; found by fuzz_gguf).
    if (al > kMaxAlignment)
      return Error{fmt::format("general.alignment {} is larger than the {} bytes any GGUF needs", al, kMaxAlignment)};
    f.alignment_ = al;
  }

  f.tensors_.reserve(std::min(n_tensors, kMaxReserve));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    TM_TRY(c.read_string(&ti.name, "tensor name"));
    if (ti.name.empty()) return Error{fmt::format("tensor #{} has an empty name", i)};
    if (f.tensor_index_.count(ti.name)) return Error{fmt::format("duplicate tensor name '{}'", ti.name)};
    uint32_t n_dims;
    TM_TRY(c.read(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims)
      return Error{fmt::format("tensor '{}': {} dimensions (must be 1..{})", ti.name, n_dims, kMaxDims)};
    int64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim;
      TM_TRY(c.read(&dim, "tensor dimension"));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Error{fmt::format("tensor '{}': invalid dimension {}", ti.name, dim)};
      ti.ne.push_back(static_cast<int64_t>(dim));
      if (__builtin_mul_overflow(n_el, static_cast<int64_t>(dim), &n_el))
        return Error{fmt::format("tensor '{}': element count overflows (size overflow)", ti.name)};
    }
    ti.n_elements = n_el;
    uint32_t type;
    TM_TRY(c.read(&type, "tensor type"));
    const DTypeInfo* info = dtype_info(type);
    if (!info) return Error{fmt::format("tensor '{}': unknown tensor type id {}", ti.name, type)};
    ti.type = info->type;
    if (ti.ne[0] % info->block_size != 0)
      return Error{fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}", ti.name,
                               ti.ne[0], info->name, info->block_size)};
    auto nbytes = dtype_row_bytes(ti.type, static_cast<uint64_t>(n_el));
    if (!nbytes) return Error{fmt::format("tensor '{}': byte size overflows (size overflow)", ti.name)};
    ti.nbytes = *nbytes;
    TM_TRY(c.read(&ti.offset, "tensor offset"));
    if (ti.offset % f.alignment_ != 0)
      return Error{fmt::format("tensor '{}': misaligned data offset {} (alignment {})", ti.name, ti.offset,
                               f.alignment_)};
    f.tensor_index_.emplace(ti.name, f.tensors_.size());
    f.tensors_.push_back(std::move(ti));
  }

  const uint64_t header_end = c.pos();
  uint64_t data_start = (header_end + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  f.data_offset_ = data_start;
  if (!f.tensors_.empty() && data_start > size)
    return Error{fmt::format("truncated file: data section would start at byte {} but the file has {} bytes",
                             data_start, size)};
  const uint64_t data_size = data_start <= size ? size - data_start : 0;
  for (auto& ti : f.tensors_) {
    uint64_t end;
    if (__builtin_add_overflow(ti.offset, ti.nbytes, &end))
      return Error{fmt::format("tensor '{}': offset + size overflows", ti.name)};
    if (ti.offset > data_size)
      return Error{fmt::format("tensor '{}': data offset {} is past the end of the file (data section has {} bytes)",
                               ti.name, ti.offset, data_size)};
    if (end > data_size)
      return Error{fmt::format("truncated file: tensor '{}' needs bytes {}..{} of the data section, which has {}",
                               ti.name, ti.offset, end, data_size)};
    ti.data = data + data_start + ti.offset;
  }
  // No two tensors may share bytes (llama.cpp refuses such files too): a crafted file could otherwise
  // alias one tensor's data as another's, of another type and shape.
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(f.tensors_.size());
  for (const auto& ti : f.tensors_) {
    if (ti.nbytes > 0) by_offset.push_back(&ti);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    const GgufTensorInfo& cur = *by_offset[i];
    if (cur.offset < prev.offset + prev.nbytes)
      return Error{fmt::format("tensors '{}' (bytes {}..{}) and '{}' (bytes {}..{}) overlap in the data section",
                               prev.name, prev.offset, prev.offset + prev.nbytes, cur.name, cur.offset,
                               cur.offset + cur.nbytes)};
  }
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_int() : std::nullopt;
}
std::optional<double> GgufFile::get_number(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_number() : std::nullopt;
}
std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_bool() : std::nullopt;
}
std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !v->as_string()) return std::nullopt;
  return *v->as_string();
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---- GgufWriter ----

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment_ != 32) set_u32("general.alignment", alignment_);
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  // The layout must follow the declared alignment, however it was declared (emit() rejects bad values).
  if (key == "general.alignment") alignment_ = value.type == GgufType::U32 ? static_cast<uint32_t>(value.bits) : 0;
  for (auto& kv : kv_)
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  kv_.emplace_back(key, std::move(value));
}

bool GgufWriter::has(const std::string& key) const {
  for (auto& kv : kv_)
    if (kv.first == key) return true;
  return false;
}

void GgufWriter::remove(const std::string& key) {
  if (key == "general.alignment") alignment_ = 32;
  for (auto it = kv_.begin(); it != kv_.end(); ++it)
    if (it->first == key) {
      kv_.erase(it);
      return;
    }
}

Status GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, Producer producer) {
  if (ne.empty() || ne.size() > kMaxDims) return Error{fmt::format("tensor '{}': bad rank {}", name, ne.size())};
  for (const auto& t : tensors_)
    if (t.name == name) return Error{fmt::format("duplicate tensor name '{}'", name)};
  uint64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) return Error{fmt::format("tensor '{}': invalid dimension {}", name, d)};
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return Error{"tensor size overflow"};
  }
  if (ne[0] % dtype_info(type).block_size != 0)
    return Error{fmt::format("tensor '{}': row length {} does not fit {} blocks of {}", name, ne[0], dtype_name(type),
                             dtype_info(type).block_size)};
  auto nbytes = dtype_row_bytes(type, n);
  if (!nbytes) return Error{"tensor size overflow"};
  tensors_.push_back({name, type, std::move(ne), *nbytes, std::move(producer)});
  return {};
}

Status GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data) {
  return add_tensor(name, type, std::move(ne), [data](uint8_t* dst, size_t n) -> Status {
    std::memcpy(dst, data, n);
    return {};
  });
}

namespace {
class ByteSink {
 public:
  explicit ByteSink(const std::function<Status(const void*, size_t)>& sink) : sink_(sink) {}
  template <class T>
  void put(T v) { buf_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    buf_ += s;
  }
  void put_raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  Status flush() {
    if (buf_.empty()) return {};
    Status st = sink_(buf_.data(), buf_.size());
    written_ += buf_.size();
    buf_.clear();
    return st;
  }
  uint64_t offset() const { return written_ + buf_.size(); }

 private:
  const std::function<Status(const void*, size_t)>& sink_;
  std::string buf_;
  uint64_t written_ = 0;
};

// A value whose parts disagree (count vs. elements) would serialize into an unreadable file.
Status check_value(const GgufValue& v, const std::string& key) {
  if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GgufType::F64))
    return Error{fmt::format("key '{}': invalid value type {}", key, static_cast<uint32_t>(v.type))};
  if (v.type != GgufType::ARRAY) return {};
  const size_t es = scalar_size(v.elem_type);
  bool ok;
  switch (v.elem_type) {
    case GgufType::STRING: ok = v.strings.size() == v.count; break;
    case GgufType::ARRAY:
      ok = v.arrays.size() == v.count;
      for (const auto& a : v.arrays) {
        if (a.type != GgufType::ARRAY) return Error{fmt::format("key '{}': nested element is not an array", key)};
        TM_TRY(check_value(a, key));
      }
      break;
    default: ok = es != 0 && v.raw.size() == v.count * es; break;
  }
  if (!ok) return Error{fmt::format("key '{}': array of {} elements does not match its contents", key, v.count)};
  return {};
}

void put_value(ByteSink& s, const GgufValue& v, bool with_type) {
  if (with_type) s.put<uint32_t>(static_cast<uint32_t>(v.type));
  switch (v.type) {
    case GgufType::STRING: s.put_string(v.str); break;
    case GgufType::ARRAY:
      s.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
      s.put<uint64_t>(v.count);
      if (v.elem_type == GgufType::STRING) {
        for (const auto& str : v.strings) s.put_string(str);
      } else if (v.elem_type == GgufType::ARRAY) {
        for (const auto& a : v.arrays) put_value(s, a, false);
      } else {
        s.put_raw(v.raw.data(), v.raw.size());
      }
      break;
    default: s.put_raw(&v.bits, scalar_size(v.type)); break;
  }
}
}  // namespace

Status GgufWriter::emit(const std::function<Status(const void*, size_t)>& sink) const {
  for (const auto& [k, v] : kv_) {
    TM_TRY(check_value(v, k));
    if (k == "general.alignment" && v.type != GgufType::U32) return Error{"general.alignment must be a u32"};
  }
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    return Error{fmt::format("general.alignment {} is not a power of two", alignment_)};
  if (alignment_ > kMaxAlignment)
    return Error{fmt::format("general.alignment {} is larger than the {} bytes any GGUF needs", alignment_, kMaxAlignment)};
  ByteSink s(sink);
  s.put<uint32_t>(kMagic);
  s.put<uint32_t>(3);
  s.put<uint64_t>(tensors_.size());
  s.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    s.put_string(k);
    put_value(s, v, true);
  }
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    s.put_string(t.name);
    s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) s.put<uint64_t>(static_cast<uint64_t>(d));
    s.put<uint32_t>(static_cast<uint32_t>(t.type));
    s.put<uint64_t>(off);
    off += (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  const std::string zeros(alignment_, '\0');
  auto pad = [&] {
    uint64_t rem = s.offset() % alignment_;
    if (rem) s.put_raw(zeros.data(), alignment_ - rem);
  };
  pad();
  TM_TRY(s.flush());
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    buf.assign(t.nbytes, 0);
    TM_TRY(t.producer(buf.data(), buf.size()));
    TM_TRY(sink(buf.data(), buf.size()));
    uint64_t rem = t.nbytes % alignment_;
    if (rem) TM_TRY(sink(zeros.data(), alignment_ - rem));
    if (progress_) progress_(static_cast<size_t>(&t - tensors_.data()) + 1, tensors_.size(), t.name);
  }
  return {};
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp) return Error{fmt::format("cannot create '{}': {}", tmp, std::strerror(errno))};
  Status st = emit([fp](const void* p, size_t n) -> Status {
    if (std::fwrite(p, 1, n, fp) != n) return Error{"write failed (disk full?)"};
    return {};
  });
  if (std::fclose(fp) != 0 && st.ok()) st = Error{"write failed while closing the file"};
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return Error{fmt::format("writing '{}': {}", path, st.error())};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Error{fmt::format("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno))};
  return {};
}

Result<std::vector<uint8_t>> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  TM_TRY(emit([&out](const void* p, size_t n) -> Status {
    auto b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
    return {};
  }));
  return out;
}

}  // namespace tmill
