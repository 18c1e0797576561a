// Hand-built GGUF files for the reader tests: every field is written explicitly (not via GgufWriter),
// so each one can be made wrong on purpose.
//   magic u32 | version u32 | n_tensors u64 | n_kv u64
//   kv:     key (u64 len + bytes) | value type u32 | value
//   tensor: name (u64 len + bytes) | n_dims u32 | dims u64[n_dims] | type u32 | offset u64
//   zero padding to the alignment | data section
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmill::test {

class Bytes {
 public:
  template <class T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u16(uint16_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& pad_to(size_t align) {
    while (b_.size() % align) b_.push_back(0);
    return *this;
  }
  std::vector<uint8_t>& vec() { return b_; }
  size_t size() const { return b_.size(); }

 private:
  std::vector<uint8_t> b_;
};

struct KvSpec {
  std::string key;
  uint32_t type;                 // GGUF value type id (may be invalid on purpose)
  std::vector<uint8_t> payload;  // encoded value, without the type id
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
  std::optional<uint32_t> n_dims_override;  // write this n_dims instead of dims.size()
};

struct FileSpec {
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors_override, n_kv_override;
  std::vector<KvSpec> kvs;
  std::vector<TensorSpec> tensors;
  uint64_t pad_alignment = 32;  // padding written before the data section
  uint64_t data_bytes = 0;      // size of the data section (filled with a byte pattern)
};

inline std::vector<uint8_t> encode_u32(uint32_t v) { return Bytes().u32(v).vec(); }
inline std::vector<uint8_t> encode_string(std::string_view s) { return Bytes().str(s).vec(); }

inline std::vector<uint8_t> build_gguf(const FileSpec& s) {
  Bytes b;
  b.u32(s.magic).u32(s.version);
  b.u64(s.n_tensors_override.value_or(s.tensors.size()));
  b.u64(s.n_kv_override.value_or(s.kvs.size()));
  for (const auto& kv : s.kvs) {
    b.str(kv.key).u32(kv.type);
    b.raw(kv.payload);
  }
  for (const auto& t : s.tensors) {
    b.str(t.name).u32(t.n_dims_override.value_or(static_cast<uint32_t>(t.dims.size())));
    for (uint64_t d : t.dims) b.u64(d);
    b.u32(t.type).u64(t.offset);
  }
  b.pad_to(s.pad_alignment);
  for (uint64_t i = 0; i < s.data_bytes; ++i) b.u8(static_cast<uint8_t>(i * 7 + 1));
  return b.vec();
}

// A small valid file: two kvs, an F32 [8] tensor at 0 and a Q8_0 [32, 2] tensor at 32 (2 blocks of 34 bytes).
inline FileSpec valid_spec() {
  FileSpec s;
  s.kvs.push_back({"general.architecture", 8, encode_string("llama")});
  s.kvs.push_back({"test.n", 4, encode_u32(7)});
  s.tensors.push_back({"a", {8}, 0, 0, std::nullopt});
  s.tensors.push_back({"b", {32, 2}, 8, 32, std::nullopt});
  s.data_bytes = 32 + 68;
  return s;
}

}  // namespace tmill::test
