// GgufWriter -> GgufFile round trips: every metadata value type, several tensor types and shapes,
// default and custom alignment, and the exact data layout llama.cpp's loader demands.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/dtype.h"
#include "formats/gguf.h"
#include "gguf_bytes.h"
#include "test_support.h"

using namespace tmill;

namespace {

template <class T>
GgufValue typed_array(GgufType et, const std::vector<T>& v) {
  GgufValue a;
  a.type = GgufType::ARRAY;
  a.elem_type = et;
  a.count = v.size();
  a.raw.resize(v.size() * sizeof(T));
  std::memcpy(a.raw.data(), v.data(), a.raw.size());
  return a;
}

std::vector<std::pair<std::string, GgufValue>> all_value_kinds() {
  std::vector<std::pair<std::string, GgufValue>> kv;
  kv.emplace_back("t.u8", GgufValue::u8(250));
  kv.emplace_back("t.i8", GgufValue::i8(-100));
  kv.emplace_back("t.u16", GgufValue::u16(65000));
  kv.emplace_back("t.i16", GgufValue::i16(-30000));
  kv.emplace_back("t.u32", GgufValue::u32(4000000000u));
  kv.emplace_back("t.i32", GgufValue::i32(-2000000000));
  kv.emplace_back("t.f32", GgufValue::f32(3.25f));
  kv.emplace_back("t.bool", GgufValue::boolean(true));
  kv.emplace_back("t.string", GgufValue::string("h\xc3\xa9llo\nw\0rld"));
  kv.emplace_back("t.empty_string", GgufValue::string(""));
  kv.emplace_back("t.u64", GgufValue::u64(0xfedcba9876543210ull));
  kv.emplace_back("t.i64", GgufValue::i64(-0x123456789abcdefll));
  kv.emplace_back("t.f64", GgufValue::f64(-1.0 / 3.0));
  kv.emplace_back("a.u8", typed_array<uint8_t>(GgufType::U8, {0, 1, 255}));
  kv.emplace_back("a.i8", typed_array<int8_t>(GgufType::I8, {-128, 0, 127}));
  kv.emplace_back("a.u16", typed_array<uint16_t>(GgufType::U16, {1, 65535}));
  kv.emplace_back("a.i16", typed_array<int16_t>(GgufType::I16, {-32768, 5}));
  kv.emplace_back("a.u32", GgufValue::u32_array({1, 2, 0xffffffffu}));
  kv.emplace_back("a.i32", GgufValue::i32_array({-1, 2, -3}));
  kv.emplace_back("a.f32", GgufValue::f32_array({0.5f, -2.0f, 1e-30f}));
  kv.emplace_back("a.bool", typed_array<uint8_t>(GgufType::BOOL, {1, 0, 1}));
  kv.emplace_back("a.string", GgufValue::string_array({"a", "", "\xe2\x96\x81the"}));
  kv.emplace_back("a.u64", typed_array<uint64_t>(GgufType::U64, {~0ull, 0}));
  kv.emplace_back("a.i64", typed_array<int64_t>(GgufType::I64, {INT64_MIN, 1}));
  kv.emplace_back("a.f64", typed_array<double>(GgufType::F64, {1e300, -0.0}));
  kv.emplace_back("a.empty", GgufValue::i32_array({}));
  // Nested: [[1, 2], ["x"], [[0.5]], []]
  GgufValue inner_inner = GgufValue::array_of_arrays({GgufValue::f32_array({0.5f})});
  kv.emplace_back("a.nested", GgufValue::array_of_arrays({GgufValue::i32_array({1, 2}),
                                                          GgufValue::string_array({"x"}), inner_inner,
                                                          GgufValue::array_of_arrays({})}));
  return kv;
}

struct TensorCase {
  std::string name;
  DType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

std::vector<TensorCase> tensor_cases() {
  std::mt19937 rng(42);
  std::vector<TensorCase> cases = {
      {"f32.matrix", DType::F32, {8, 3}, {}},       // 96 bytes (multiple of 32)
      {"f16.vector", DType::F16, {13}, {}},         // 26 bytes: padded
      {"q8_0", DType::Q8_0, {64, 2}, {}},           // 4 blocks * 34 = 136 bytes
      {"q4_k", DType::Q4_K, {256, 2}, {}},          // 2 blocks * 144 = 288 bytes
      {"bf16.4d", DType::BF16, {3, 2, 2, 1}, {}},   // 24 bytes
      {"i32.one", DType::I32, {1}, {}},             // 4 bytes
      {"q6_k.3d", DType::Q6_K, {256, 1, 3}, {}},    // 3 blocks * 210 = 630 bytes
  };
  for (auto& c : cases) {
    uint64_t n = 1;
    for (auto d : c.ne) n *= d;
    c.bytes.resize(*dtype_row_bytes(c.type, n));
    for (auto& b : c.bytes) b = static_cast<uint8_t>(rng());
  }
  return cases;
}

uint64_t pad(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Writes, reads back and checks every field; `expect_alignment` is what the file must declare.
void round_trip(GgufWriter& w, uint64_t expect_alignment, const std::vector<TensorCase>& cases,
                const std::vector<std::pair<std::string, GgufValue>>& kv_expected) {
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  auto f = GgufFile::parse(bytes->data(), bytes->size());
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), expect_alignment);

  // Metadata: same order, types and values.
  ASSERT_EQ(f->metadata().size(), kv_expected.size());
  for (size_t i = 0; i < kv_expected.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, kv_expected[i].first);
    EXPECT_EQ(f->metadata()[i].second.type, kv_expected[i].second.type) << kv_expected[i].first;
    EXPECT_TRUE(f->metadata()[i].second == kv_expected[i].second) << kv_expected[i].first;
  }

  // Data layout as ggml's gguf loader checks it: the data section starts at the first aligned offset
  // after the header, and tensor i sits at the sum of the padded sizes of tensors 0..i-1.
  EXPECT_EQ(f->data_offset() % expect_alignment, 0u);
  ASSERT_EQ(f->tensors().size(), cases.size());
  uint64_t expect_off = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& t = f->tensors()[i];
    const auto& c = cases[i];
    EXPECT_EQ(t.name, c.name);
    EXPECT_EQ(t.type, c.type) << c.name;
    EXPECT_EQ(t.ne, c.ne) << c.name;
    EXPECT_EQ(t.nbytes, c.bytes.size()) << c.name;
    EXPECT_EQ(t.offset, expect_off) << c.name;
    EXPECT_EQ(t.offset % expect_alignment, 0u);
    EXPECT_EQ(t.data, bytes->data() + f->data_offset() + t.offset);
    EXPECT_EQ(std::memcmp(t.data, c.bytes.data(), c.bytes.size()), 0) << c.name;
    // Padding bytes are zero.
    for (uint64_t p = c.bytes.size(); p < pad(c.bytes.size(), expect_alignment); ++p)
      EXPECT_EQ(t.data[p], 0) << c.name << " pad byte " << p;
    expect_off += pad(c.bytes.size(), expect_alignment);
  }
  EXPECT_EQ(bytes->size(), f->data_offset() + expect_off);
}

}  // namespace

TEST(GgufRoundTrip, EveryValueTypeAndTensorTypeDefaultAlignment) {
  GgufWriter w;
  auto kv = all_value_kinds();
  for (auto& [k, v] : kv) w.set(k, v);
  auto cases = tensor_cases();
  for (auto& c : cases) ASSERT_TRUE(w.add_tensor(c.name, c.type, c.ne, c.bytes.data()).ok());
  round_trip(w, 32, cases, kv);
}

TEST(GgufRoundTrip, CustomAlignmentViaConstructor) {
  GgufWriter w(64);
  auto kv = all_value_kinds();
  for (auto& [k, v] : kv) w.set(k, v);
  auto cases = tensor_cases();
  for (auto& c : cases) ASSERT_TRUE(w.add_tensor(c.name, c.type, c.ne, c.bytes.data()).ok());
  kv.insert(kv.begin(), {"general.alignment", GgufValue::u32(64)});
  round_trip(w, 64, cases, kv);
}

TEST(GgufRoundTrip, CustomAlignmentViaMetadataKey) {
  // Setting general.alignment as a plain key must change the layout too, or readers that honour the
  // key (ggml, us) would find misaligned offsets.
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("general.alignment", 64);
  auto cases = tensor_cases();
  for (auto& c : cases) ASSERT_TRUE(w.add_tensor(c.name, c.type, c.ne, c.bytes.data()).ok());
  round_trip(w, 64, cases,
             {{"general.architecture", GgufValue::string("llama")}, {"general.alignment", GgufValue::u32(64)}});
}

TEST(GgufRoundTrip, WriterRejectsInvalidAlignmentAndMalformedValues) {
  GgufWriter w(48);  // not a power of two: the file would be unreadable
  EXPECT_FALSE(w.to_bytes().ok());
  GgufWriter huge(1u << 30);  // a power of two, but 1 GiB of padding: refused before allocating
  auto h = huge.to_bytes();
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().find("larger than"), std::string::npos) << h.error();
  GgufWriter w2;
  GgufValue bad = GgufValue::u32_array({1, 2});
  bad.count = 3;  // raw holds only 2 elements
  w2.set("bad", bad);
  auto r = w2.to_bytes();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("bad"), std::string::npos) << r.error();
}

TEST(GgufRoundTrip, WriterRejectsBadTensors) {
  GgufWriter w;
  float x[64] = {};
  EXPECT_TRUE(w.add_tensor("x", DType::F32, {64}, x).ok());
  EXPECT_FALSE(w.add_tensor("x", DType::F32, {64}, x).ok());             // duplicate
  EXPECT_FALSE(w.add_tensor("y", DType::Q8_0, {48}, x).ok());            // not a whole block
  EXPECT_FALSE(w.add_tensor("z", DType::F32, {}, x).ok());               // rank 0
  EXPECT_FALSE(w.add_tensor("z", DType::F32, {1, 1, 1, 1, 1}, x).ok());  // rank 5
  EXPECT_FALSE(w.add_tensor("z", DType::F32, {0}, x).ok());
  // A producer error surfaces from write().
  EXPECT_TRUE(w.add_tensor("p", DType::F32, {4}, [](uint8_t*, size_t) -> Status { return Error{"boom"}; }).ok());
  auto r = w.to_bytes();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "boom");
}

TEST(GgufRoundTrip, WriteAndOpenFromDisk) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("x.flag", false);
  std::vector<float> data(32);
  for (int i = 0; i < 32; ++i) data[i] = i * 0.5f;
  ASSERT_TRUE(w.add_tensor("t", DType::F32, {16, 2}, data.data()).ok());
  const std::string path = test::temp_dir() + "/m.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 2);
  EXPECT_EQ(f->get_number("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f->get_bool("x.flag"), false);
  EXPECT_EQ(f->get_int("missing"), std::nullopt);
  EXPECT_EQ(f->get_string("llama.block_count"), std::nullopt);  // wrong type
  const GgufTensorInfo* t = f->find_tensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::memcmp(t->data, data.data(), 128), 0);
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
  // The mapping outlives the GgufFile for holders of tensor pointers.
  auto keep = f->mapping();
  const uint8_t* p = t->data;
  { GgufFile moved = std::move(f).value(); }
  float first;
  std::memcpy(&first, p + 4, 4);
  EXPECT_EQ(first, 0.5f);
}

TEST(GgufRoundTrip, HandBuiltValidFileParses) {
  auto bytes = test::build_gguf(test::valid_spec());
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("test.n"), 7);
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[1].type, DType::Q8_0);
  EXPECT_EQ(f->tensors()[1].nbytes, 68u);
  EXPECT_EQ(f->tensors()[1].n_elements, 64);
}

TEST(GgufValue, Accessors) {
  EXPECT_EQ(GgufValue::i8(-5).as_int(), -5);
  EXPECT_EQ(GgufValue::u64(~0ull).as_int(), std::nullopt);
  EXPECT_EQ(GgufValue::u64(~0ull).as_number(), 18446744073709551615.0);
  EXPECT_EQ(GgufValue::f32(1.5f).as_int(), std::nullopt);
  EXPECT_EQ(GgufValue::f32(1.5f).as_number(), 1.5);
  EXPECT_EQ(GgufValue::boolean(true).as_bool(), true);
  EXPECT_EQ(GgufValue::u8(1).as_bool(), std::nullopt);
  EXPECT_EQ(*GgufValue::i32_array({-1, 4}).as_int_array(), (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(*GgufValue::i32_array({-1, 4}).as_f32_array(), (std::vector<float>{-1.0f, 4.0f}));
  EXPECT_EQ(GgufValue::string_array({"a"}).as_f32_array(), std::nullopt);
  EXPECT_FALSE(GgufValue::u32(1) == GgufValue::i32(1));
  EXPECT_EQ(GgufValue::string_array({"a", "b"}).to_display(), "[2 x string] [\"a\", \"b\"]");
  EXPECT_EQ(GgufValue::i16(-7).to_display(), "-7");
}
