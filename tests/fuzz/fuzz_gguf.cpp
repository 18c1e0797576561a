// fuzz-deps: formats
// libFuzzer target: GgufFile::parse on arbitrary bytes. On success every metadata value and the first
// and last byte of every tensor are touched, and the file is re-serialized with GgufWriter and parsed
// again: metadata and tensor bytes must survive the round trip unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "formats/gguf.h"

using namespace tmill;

// Global (not static) so the compiler must keep the reads that feed it.
uint64_t g_fuzz_gguf_sink;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_gguf: invariant broken: %s\n", what);
  std::abort();
}


void touch(const GgufValue& v) {
  g_fuzz_gguf_sink += v.to_display(4).size();
  if (auto i = v.as_int()) g_fuzz_gguf_sink += static_cast<uint64_t>(*i);
  if (auto d = v.as_number()) g_fuzz_gguf_sink += static_cast<uint64_t>(*d != 0);
  if (auto b = v.as_bool()) g_fuzz_gguf_sink += *b;
  if (const std::string* s = v.as_string()) g_fuzz_gguf_sink += s->size();
  if (const auto* sa = v.as_string_array()) {
    if (sa->size() != v.count) fail("string array count");
    for (const auto& s : *sa) g_fuzz_gguf_sink += s.size();
  }
  if (auto fa = v.as_f32_array()) {
    if (fa->size() != v.count) fail("f32 array count");
  }
  if (auto ia = v.as_int_array()) {
    if (ia->size() != v.count) fail("int array count");
  }
  if (v.type == GgufType::ARRAY && v.elem_type == GgufType::ARRAY) {
    if (v.arrays.size() != v.count) fail("nested array count");
    for (const auto& a : v.arrays) touch(a);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = GgufFile::parse(data, size);
  if (!r.ok()) {
    if (r.error().empty()) fail("empty error message");
    return 0;
  }
  const GgufFile& f = *r;
  for (const auto& [k, v] : f.metadata()) {
    if (f.find(k) != &v) fail("find() disagrees with metadata()");
    touch(v);
  }
  if (f.data_offset() % f.alignment() != 0) fail("unaligned data section");
  for (const auto& t : f.tensors()) {
    if (t.nbytes == 0 || t.data < data || t.data + t.nbytes > data + size) fail("tensor data out of bounds");
    if (f.find_tensor(t.name) != &t) fail("find_tensor() disagrees with tensors()");
    g_fuzz_gguf_sink += t.data[0] + t.data[t.nbytes - 1];
  }

  // Round trip through the writer.
  GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  for (const auto& t : f.tensors())
    if (!w.add_tensor(t.name, t.type, t.ne, t.data).ok()) fail("writer rejected a tensor the reader accepted");
  auto bytes = w.to_bytes();
  if (!bytes.ok()) fail("writer rejected metadata the reader accepted");
  auto r2 = GgufFile::parse(bytes->data(), bytes->size());
  if (!r2.ok()) fail("re-serialized file does not parse");
  if (r2->metadata().size() != f.metadata().size()) fail("metadata count changed");
  for (size_t i = 0; i < f.metadata().size(); ++i)
    if (r2->metadata()[i].first != f.metadata()[i].first || !(r2->metadata()[i].second == f.metadata()[i].second))
      fail("metadata changed in the round trip");
  if (r2->tensors().size() != f.tensors().size()) fail("tensor count changed");
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = r2->tensors()[i];
    if (a.name != b.name || a.type != b.type || a.ne != b.ne || a.nbytes != b.nbytes ||
        std::memcmp(a.data, b.data, a.nbytes) != 0)
      fail("tensor changed in the round trip");
  }
  return 0;
}
