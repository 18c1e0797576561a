// GGUF (v2, v3) reader over mmap and writer. Layout per the GGUF spec (ggml/docs/gguf.md):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | kv pairs | tensor infos | pad | data
// Every count, offset and size in an untrusted file is checked (overflow-safe) before use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mmap.h"
#include "core/result.h"

namespace tmill {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars keep their raw little-endian bits; arrays keep numeric elements packed
// (raw), strings as strings, nested arrays as values.
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t bits = 0;            // scalar numeric/bool payload, zero-extended
  std::string str;              // STRING
  GgufType elem_type = GgufType::U8;  // ARRAY
  uint64_t count = 0;           // ARRAY element count
  std::vector<uint8_t> raw;     // ARRAY of numbers/bools: count * element size bytes
  std::vector<std::string> strings;  // ARRAY of STRING
  std::vector<GgufValue> arrays;     // ARRAY of ARRAY

  // Constructors for writers and tests.
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue u32_array(const std::vector<uint32_t>& v);
  static GgufValue bool_array(const std::vector<bool>& v);
  static GgufValue array_of_arrays(std::vector<GgufValue> v);

  bool is_integer() const;
  bool is_float() const;
  // Any integer type (or bool) as int64; nullopt for other types or u64 values above INT64_MAX.
  std::optional<int64_t> as_int() const;
  // Any number as double.
  std::optional<double> as_number() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const std::vector<std::string>* as_string_array() const;
  // Numeric arrays converted element-wise; nullopt if not a numeric array.
  std::optional<std::vector<float>> as_f32_array() const;
  std::optional<std::vector<int64_t>> as_int_array() const;

  bool operator==(const GgufValue& o) const;
  std::string to_display(size_t max_items = 8) const;  // for `inspect`
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;
  int64_t n_elements = 0;
  const uint8_t* data = nullptr;  // points into the mapped file
};

class GgufFile {
 public:
  // Maps and validates the file. Errors name the file and the problem.
  static Result<GgufFile> open(const std::string& path);
  // Parses a buffer the caller keeps alive (tests, fuzzing).
  static Result<GgufFile> parse(const uint8_t* data, size_t size);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return path_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_number(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Keeps the mapping alive for holders of tensor data pointers.
  std::shared_ptr<const MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// Builds a GGUF file: metadata in insertion order, tensors in insertion order, each tensor's data
// padded to the alignment, exactly as llama.cpp expects. Tensor bytes are produced at write time by
// a callback, so multi-GB models never sit in memory whole.
class GgufWriter {
 public:
  using Producer = std::function<Status(uint8_t* dst, size_t nbytes)>;

  explicit GgufWriter(uint32_t alignment = 32);

  void set(const std::string& key, GgufValue value);  // replaces an existing key in place
  void set_u32(const std::string& k, uint32_t v) { set(k, GgufValue::u32(v)); }
  void set_i32(const std::string& k, int32_t v) { set(k, GgufValue::i32(v)); }
  void set_u64(const std::string& k, uint64_t v) { set(k, GgufValue::u64(v)); }
  void set_f32(const std::string& k, float v) { set(k, GgufValue::f32(v)); }
  void set_bool(const std::string& k, bool v) { set(k, GgufValue::boolean(v)); }
  void set_string(const std::string& k, std::string v) { set(k, GgufValue::string(std::move(v))); }
  bool has(const std::string& key) const;
  void remove(const std::string& key);

  // ne in ggml order. nbytes is computed from type and shape; the producer fills exactly that.
  Status add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, Producer producer);
  // Convenience: copies from memory the caller keeps alive until write().
  Status add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data);

  Status write(const std::string& path) const;
  // The file's bytes, in order, to `sink` (an in-memory file, a pipe).
  using Sink = std::function<Status(const void*, size_t)>;
  Status write_to(const Sink& sink) const { return emit(sink); }
  // Called after each tensor's bytes are produced (by write, write_to, to_bytes): tensors done,
  // tensor count, the tensor's name. For progress displays.
  void set_progress(std::function<void(size_t, size_t, const std::string&)> progress) { progress_ = std::move(progress); }
  size_t tensor_count() const { return tensors_.size(); }
  // Serialized bytes (small files, tests).
  Result<std::vector<uint8_t>> to_bytes() const;

 private:
  struct Pending {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    Producer producer;
  };
  Status emit(const std::function<Status(const void*, size_t)>& sink) const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Pending> tensors_;
  std::function<void(size_t, size_t, const std::string&)> progress_;
};

}  // namespace tmill
