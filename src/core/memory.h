// Process-wide allocator settings.
#pragma once

#include <cstdint>
#include <string_view>

namespace tmill {

// glibc malloc serves blocks over 128 KiB (a threshold it moves as blocks are freed) with fresh
// mmap()s and hands them back on free: every compile of a large grammar, every big temporary vector
// page-faults its memory in again. Under a hypervisor a fault costs ~10 us, which made compiling a
// 110 KB GBNF 81 ms instead of 29 ms. tune_allocator() keeps blocks up to 32 MiB in the heap and
// up to 256 MiB of freed heap mapped (bigger allocations, e.g. the KV cache, are mmapped as before).
// The MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ environment variables, when set, win. No-op
// outside glibc.
void tune_allocator();

// For a process under a memory limit (serve --memory-limit / --buffer-memory): freed memory must
// leave the resident set, not stay in malloc's per-thread arenas. Blocks of 4 MiB and more are
// mmapped (and unmapped when freed), free heap above 4 MiB is trimmed, and at most 4 arenas are made
// (one per thread up to 8 per core otherwise: each keeps its own high-water mark). Measured
// (tests/e2e/memory_limit.test.mjs, 24 clients of 256 KiB bodies, 48 MiB request budget): the
// server's PSS grew 124 MiB above idle with the defaults, 38 MiB with these, at the same request
// rate. The MALLOC_* environment variables, when set, win. Call after tune_allocator; no-op outside
// glibc.
void bound_allocator();

// Hands free heap memory back to the system (glibc: malloc_trim(0), which also releases free pages
// inside the heap, in every arena). tune_allocator keeps up to 256 MiB of freed heap mapped; after
// a model is unloaded that would stay in the resident set and count against a memory budget. No-op
// outside glibc.
void release_free_memory();

// A /proc/meminfo field in bytes ("MemTotal", "MemAvailable"); 0 when it cannot be read.
uint64_t meminfo_bytes(std::string_view field);

}  // namespace tmill
