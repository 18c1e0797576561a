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

// An anonymous file in memory (Linux memfd): written once by its producer, then opened by path
// (`path()`, /proc/self/fd/N) by readers that take a path, such as MappedFile::open. Its pages live
// while this object or any mapping of it does: close it once the readers have mapped it.
class MemoryFile {
 public:
  MemoryFile() = default;
  ~MemoryFile();
  MemoryFile(MemoryFile&& o) noexcept;
  MemoryFile& operator=(MemoryFile&& o) noexcept;
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // `name` shows in /proc/PID/fd and maps (memfd:NAME).
  static Result<MemoryFile> create(const std::string& name);
  // Appends bytes. Errors: out of memory (ENOSPC / ENOMEM).
  Status append(const void* data, size_t size);
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  std::string path() const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Whole file into memory (small files: JSON, tokenizer.bin ...).
Result<std::string> read_file(const std::string& path);
Status write_file(const std::string& path, const void* data, size_t size);

}  // namespace tmill
