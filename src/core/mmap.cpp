#include "core/mmap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace tmill {

MappedFile::~MappedFile() {
  if (data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_), path_(std::move(o.path_)) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{fmt::format("cannot open '{}': {}", path, std::strerror(errno))};
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Error{fmt::format("cannot stat '{}': {}", path, std::strerror(e))};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{fmt::format("'{}' is not a regular file", path)};
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Error{fmt::format("cannot mmap '{}': {}", path, std::strerror(e))};
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

void MappedFile::drop_resident_pages() const {
  if (data_ && size_) madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

MemoryFile::~MemoryFile() {
  if (fd_ >= 0) ::close(fd_);
}

MemoryFile::MemoryFile(MemoryFile&& o) noexcept : fd_(o.fd_), size_(o.size_) {
  o.fd_ = -1;
  o.size_ = 0;
}

MemoryFile& MemoryFile::operator=(MemoryFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    o.fd_ = -1;
    o.size_ = 0;
  }
  return *this;
}

Result<MemoryFile> MemoryFile::create(const std::string& name) {
  MemoryFile f;
  f.fd_ = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (f.fd_ < 0) return Error{fmt::format("cannot create an in-memory file: {}", std::strerror(errno))};
  return f;
}

Status MemoryFile::append(const void* data, size_t size) {
  auto p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{fmt::format("writing the in-memory file: {} (out of memory?)", std::strerror(errno))};
    }
    p += n;
    size -= static_cast<size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
  return {};
}

std::string MemoryFile::path() const { return fmt::format("/proc/self/fd/{}", fd_); }

Result<std::string> read_file(const std::string& path) {
  FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) return Error{fmt::format("cannot open '{}': {}", path, std::strerror(errno))};
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, fp)) > 0) out.append(buf, n);
  bool err = std::ferror(fp);
  std::fclose(fp);
  if (err) return Error{fmt::format("error reading '{}'", path)};
  return out;
}

Status write_file(const std::string& path, const void* data, size_t size) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) return Error{fmt::format("cannot create '{}': {}", path, std::strerror(errno))};
  bool ok = std::fwrite(data, 1, size, fp) == size;
  ok = (std::fclose(fp) == 0) && ok;
  if (!ok) return Error{fmt::format("error writing '{}'", path)};
  return {};
}

}  // namespace tmill
