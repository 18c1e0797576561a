#include "core/memory.h"

#include <cstdio>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tmill {

uint64_t meminfo_bytes(std::string_view field) {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    const std::string_view l(line);
    if (l.size() > field.size() && l.substr(0, field.size()) == field && l[field.size()] == ':') {
      if (std::sscanf(line + field.size() + 1, " %llu kB", &kb) != 1) kb = 0;
      break;
    }
  }
  std::fclose(f);
  return static_cast<uint64_t>(kb) * 1024;
}

void tune_allocator() {
#if defined(__GLIBC__)
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void bound_allocator() {
#if defined(__GLIBC__)
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 4 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 4 << 20);
  if (!std::getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 4);
#endif
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace tmill
