// Hugging Face safetensors reader over mmap, for single files and sharded model folders.
// File layout (little-endian):
//   u64 N | N bytes of UTF-8 JSON header (may be padded with spaces) | data section
// Header: {"__metadata__": {"key": "value", ...},            (optional, string -> string)
//          "tensor name": {"dtype": "BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
// shape is row-major, outermost first (shape.back() is contiguous); data_offsets are a byte range
// [begin, end) relative to the start of the data section (byte 8 + N). Data need not be aligned.
// Everything in the header is validated before use: sizes (overflow-safe), bounds, overlaps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mmap.h"
#include "core/result.h"

namespace tmill {

enum class StDType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2 };
const char* st_dtype_name(StDType t);  // as spelled in the header ("BF16")
size_t st_dtype_size(StDType t);       // bytes per element
// F32, F16 and BF16: the dtypes model weights may be converted from.
inline bool st_dtype_is_float(StDType t) { return t == StDType::F32 || t == StDType::F16 || t == StDType::BF16; }
inline bool st_dtype_is_fp8(StDType t) { return t == StDType::F8_E4M3 || t == StDType::F8_E5M2; }

struct SafetensorsTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;     // row-major, outermost first; empty for a scalar
  uint64_t begin = 0, end = 0;    // byte range in the data section
  int64_t n_elements = 0;
  const uint8_t* data = nullptr;  // points into the mapped file (or the parsed buffer)
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps and validates a file. Errors name the file (and the tensor, where one is at fault).
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses a buffer the caller keeps alive (tests, fuzzing); `name` is used in error messages.
  static Result<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& name = "<buffer>");

  const std::string& path() const { return path_; }
  // __metadata__ in header order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  // Tensors in header order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  uint64_t data_offset() const { return data_offset_; }  // 8 + header length

  // Elements [first, first + count) of a tensor of this file as f32: F32/F16/BF16, FP8 (E4M3, E5M2)
  // and I8 (the integer codes) tensors; any other dtype is an "unsupported dtype" error naming the file
  // and the tensor.
  Status read_f32(const SafetensorsTensor& t, uint64_t first, uint64_t count, float* out) const;
  Status read_f32(const SafetensorsTensor& t, float* out) const {
    return read_f32(t, 0, static_cast<uint64_t>(t.n_elements), out);
  }

  std::shared_ptr<const MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::string path_;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// The weights of a Hugging Face model folder: the shards listed by model.safetensors.index.json
// ("weight_map": tensor name -> shard file name), else the single file model.safetensors.
class SafetensorsModel {
 public:
  static Result<SafetensorsModel> open(const std::string& dir);

  struct Ref {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
  };
  // Every tensor name, in the order llama.cpp's converter visits them: shards by file name, and
  // tensor names sorted within a shard.
  const std::vector<std::string>& names() const { return names_; }
  std::optional<Ref> find(std::string_view name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  bool sharded() const { return sharded_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::pair<size_t, size_t>> index_;  // name -> (file, tensor)
  bool sharded_ = false;
};

}  // namespace tmill
