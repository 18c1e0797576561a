// Read-only memory-mapped file (model weights are used in place, never copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/result.h"

namespace tmill {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Unmaps the pages this process has touched (madvise MADV_DONTNEED); the data stays valid and
  // later reads fault the pages in again from the page cache or the file. For mappings whose
  // contents were copied elsewhere (repacked weights), so they stop counting in the resident set.
  void drop_resident_pages() const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Whole file into memory (small files: JSON, tokenizer.bin ...).
Result<std::string> read_file(const std::string& path);
Status write_file(const std::string& path, const void* data, size_t size);

}  // namespace tmill
