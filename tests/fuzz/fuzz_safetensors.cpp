// fuzz-deps: formats
// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. On success every tensor must lie inside
// the input and not overlap another, its first/last byte is read, and float tensors are converted
// to f32 (as are FP8 and I8 ones; other dtypes must be refused with an "unsupported dtype" error).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "formats/safetensors.h"

using namespace tmill;

// Global (not static) so the compiler must keep the reads that feed it.
uint64_t g_fuzz_safetensors_sink;

namespace {
void fail(const char* what) {
  std::fprintf(stderr, "fuzz_safetensors: invariant broken: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = SafetensorsFile::parse(data, size, "fuzz");
  if (!r.ok()) {
    if (r.error().empty()) fail("empty error message");
    return 0;
  }
  const SafetensorsFile& f = *r;
  for (const auto& [k, v] : f.metadata()) g_fuzz_safetensors_sink += k.size() + v.size();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<float> buf;
  for (const auto& t : f.tensors()) {
    if (f.find(t.name) != &t) fail("find() disagrees with tensors()");
    if (t.end < t.begin || f.data_offset() + t.end > size) fail("tensor out of bounds");
    if (t.data != data + f.data_offset() + t.begin) fail("tensor data pointer");
    if (t.nbytes() != static_cast<uint64_t>(t.n_elements) * st_dtype_size(t.dtype)) fail("size mismatch");
    if (t.nbytes() == 0) continue;
    ranges.emplace_back(t.begin, t.end);
    g_fuzz_safetensors_sink += t.data[0] + t.data[t.nbytes() - 1];
    const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(t.n_elements), 1 << 16);
    buf.resize(n);
    const bool ok = f.read_f32(t, 0, n, buf.data()).ok();
    const bool readable = st_dtype_is_float(t.dtype) || st_dtype_is_fp8(t.dtype) || t.dtype == StDType::I8;
    if (ok != readable) fail("read_f32 accepted/refused the wrong dtype");
    if (ok)
      for (float x : buf) g_fuzz_safetensors_sink += x > 0;
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fail("overlapping tensors accepted");
  return 0;
}
