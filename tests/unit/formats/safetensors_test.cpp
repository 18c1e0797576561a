// Safetensors reader: valid hand-built files (all dtypes, metadata, scalars, empty tensors), corrupt
// ones (each rejected with a message naming the file, the tensor and the problem) and model folders
// (single file and sharded via model.safetensors.index.json).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/fp16.h"
#include "formats/safetensors.h"
#include "st_builder.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::test;

namespace {

#define EXPECT_ERROR_HAS(err, phrase) EXPECT_NE((err).find(phrase), std::string::npos) << "error: " << (err)

std::string parse_error(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() + 1]);  // exact size: ASan sees overreads
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  auto r = SafetensorsFile::parse(copy.get(), bytes.size(), "t.safetensors");
  if (r.ok()) return "<parsed OK>";
  EXPECT_ERROR_HAS(r.error(), "t.safetensors");
  return r.error();
}

std::string header_error(const std::string& header, size_t data_bytes = 64) {
  return parse_error(raw_safetensors(header, std::vector<uint8_t>(data_bytes, 0)));
}

}  // namespace

TEST(Safetensors, ParsesEveryDtypeAndMetadata) {
  const std::vector<float> a = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 8.0f};
  std::vector<StTensor> ts = {
      {"w.f32", "F32", {2, 3}, encode_floats(a, "F32")},
      {"w.f16", "F16", {3, 2}, encode_floats(a, "F16")},
      {"w.bf16", "BF16", {6}, encode_floats(a, "BF16")},
      {"ids", "I32", {2}, {1, 0, 0, 0, 2, 0, 0, 0}},
      {"scalar", "F64", {}, std::vector<uint8_t>(8, 0)},
      {"empty", "F32", {0, 4}, {}},
      {"mask", "BOOL", {3}, {1, 0, 1}},
      {"codes", "I8", {4}, {0x80, 0xff, 0x00, 0x7f}},
  };
  auto bytes = build_safetensors(ts, {{"format", "pt"}, {"note", "x"}});
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "m.safetensors");
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->metadata(), (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"note", "x"}}));
  ASSERT_EQ(f->tensors().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = f->tensors()[i];
    EXPECT_EQ(t.name, ts[i].name);  // header order
    EXPECT_STREQ(st_dtype_name(t.dtype), ts[i].dtype.c_str());
    EXPECT_EQ(t.shape, ts[i].shape);
    EXPECT_EQ(t.nbytes(), ts[i].bytes.size());
    if (!ts[i].bytes.empty()) {
      EXPECT_EQ(std::memcmp(t.data, ts[i].bytes.data(), t.nbytes()), 0) << t.name;
    }
  }
  EXPECT_EQ(f->find("scalar")->n_elements, 1);
  EXPECT_EQ(f->find("empty")->n_elements, 0);
  EXPECT_EQ(f->find("nope"), nullptr);

  for (const char* name : {"w.f32", "w.f16", "w.bf16"}) {
    std::vector<float> out(6);
    ASSERT_TRUE(f->read_f32(*f->find(name), out.data()).ok());
    EXPECT_EQ(out, a) << name;
    std::vector<float> part(2);
    ASSERT_TRUE(f->read_f32(*f->find(name), 3, 2, part.data()).ok());
    EXPECT_EQ(part, (std::vector<float>{3.0f, -0.5f})) << name;
    EXPECT_FALSE(f->read_f32(*f->find(name), 5, 2, part.data()).ok());
  }
  std::vector<float> codes(4);  // I8: the integer codes (INT8 checkpoints, scaled by the converter)
  ASSERT_TRUE(f->read_f32(*f->find("codes"), codes.data()).ok());
  EXPECT_EQ(codes, (std::vector<float>{-128.0f, -1.0f, 0.0f, 127.0f}));
  std::vector<float> out(8);
  for (const char* name : {"ids", "scalar", "mask"}) {
    auto st = f->read_f32(*f->find(name), out.data());
    ASSERT_FALSE(st.ok());
    EXPECT_ERROR_HAS(st.error(), "unsupported dtype");
    EXPECT_ERROR_HAS(st.error(), std::string("'") + name + "'");
    EXPECT_ERROR_HAS(st.error(), "m.safetensors");
  }
}

TEST(Safetensors, ConversionMatchesReferenceHalfFormats) {
  // Every F16 bit pattern (except NaNs) and a spread of BF16 ones decode like core/fp16.h.
  std::vector<uint8_t> f16, bf16;
  std::vector<float> want16, want_bf;
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
    f16.push_back(h & 0xff), f16.push_back(h >> 8);
    want16.push_back(fp16_to_fp32(static_cast<uint16_t>(h)));
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) continue;
    bf16.push_back(h & 0xff), bf16.push_back(h >> 8);
    want_bf.push_back(bf16_to_fp32(static_cast<uint16_t>(h)));
  }
  auto bytes = build_safetensors({{"h", "F16", {static_cast<int64_t>(want16.size())}, f16},
                                  {"b", "BF16", {static_cast<int64_t>(want_bf.size())}, bf16}});
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.error();
  std::vector<float> got(want16.size());
  ASSERT_TRUE(f->read_f32(*f->find("h"), got.data()).ok());
  EXPECT_EQ(got, want16);
  got.resize(want_bf.size());
  ASSERT_TRUE(f->read_f32(*f->find("b"), got.data()).ok());
  EXPECT_EQ(got, want_bf);
}

TEST(SafetensorsCorrupt, HeaderLength) {
  EXPECT_ERROR_HAS(parse_error({1, 0, 0}), "too short");
  auto b = raw_safetensors("{}", {});
  b[0] = 100;  // header claims 100 bytes, file has 2
  EXPECT_ERROR_HAS(parse_error(b), "runs past the end");
  std::vector<uint8_t> huge(16, 0);
  huge[7] = 0x40;  // 2^62
  EXPECT_ERROR_HAS(parse_error(huge), "absurd header length");
  huge.assign(16, 0);
  huge[3] = 0x10;  // 256 MiB: above the 100 MB limit
  EXPECT_ERROR_HAS(parse_error(huge), "absurd header length");
  EXPECT_EQ(header_error("{}"), "<parsed OK>");
  EXPECT_EQ(header_error("{}      "), "<parsed OK>");  // space padding is allowed
}

TEST(SafetensorsCorrupt, BadJson) {
  EXPECT_ERROR_HAS(header_error("{\"a\": "), "bad JSON header");
  EXPECT_ERROR_HAS(header_error("{\"a\": 1}}"), "bad JSON header");
  EXPECT_ERROR_HAS(header_error("{\"\xff\": 1}"), "bad JSON header");  // invalid UTF-8
  EXPECT_ERROR_HAS(header_error("[1, 2]"), "not a JSON object");
  EXPECT_ERROR_HAS(header_error("\"str\""), "not a JSON object");
  EXPECT_ERROR_HAS(header_error("{\"a\": 5}"), "tensor 'a': entry is not a JSON object");
  EXPECT_ERROR_HAS(header_error("{\"__metadata__\": [1]}"), "__metadata__ is not a JSON object");
  EXPECT_ERROR_HAS(header_error("{\"__metadata__\": {\"k\": 1}}"), "__metadata__ value of 'k' is not a string");
}

TEST(SafetensorsCorrupt, TensorEntries) {
  auto e = [](const std::string& body) { return header_error("{\"w\": {" + body + "}}", 64); };
  EXPECT_ERROR_HAS(e(R"("shape": [2], "data_offsets": [0, 8])"), "tensor 'w': missing or non-string \"dtype\"");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "data_offsets": [0, 8])"), "tensor 'w': missing or non-array \"shape\"");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2])"), "\"data_offsets\" must be an array");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2], "data_offsets": [0])"), "\"data_offsets\" must be an array");
  EXPECT_ERROR_HAS(e(R"("dtype": "Q4", "shape": [2], "data_offsets": [0, 8])"), "tensor 'w': unknown dtype 'Q4'");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [-2], "data_offsets": [0, 8])"), "non-negative integer");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2.5], "data_offsets": [0, 8])"), "non-negative integer");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2], "data_offsets": [-8, 8])"), "non-negative integer");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2], "data_offsets": [8, 0])"), "end 0 is before begin 8");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2], "data_offsets": [60, 68])"), "run past the end");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [3], "data_offsets": [0, 8])"), "cover 8 bytes but [3] F32 needs 12");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8])"), "overflows");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8])"),
                   "byte size of shape");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4])"), "rank 9");
  EXPECT_ERROR_HAS(e(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615])"),
                   "run past the end");
}

TEST(SafetensorsCorrupt, OverlapAndDuplicates) {
  const std::string w = R"("dtype": "F32", "shape": [2], "data_offsets": )";
  auto err = header_error("{\"a\": {" + w + "[0, 8]}, \"b\": {" + w + "[4, 12]}}");
  EXPECT_ERROR_HAS(err, "tensors 'a' and 'b' overlap");
  err = header_error("{\"b\": {" + w + "[8, 16]}, \"a\": {" + w + "[12, 20]}, \"c\": {" + w + "[0, 8]}}");
  EXPECT_ERROR_HAS(err, "tensors 'b' and 'a' overlap");
  // Touching ranges and empty tensors anywhere are fine.
  EXPECT_EQ(header_error("{\"a\": {" + w + "[0, 8]}, \"b\": {" + w + "[8, 16]}, \"e\": {\"dtype\": \"F32\", "
                         "\"shape\": [0], \"data_offsets\": [4, 4]}}"),
            "<parsed OK>");
  err = header_error("{\"a\": {" + w + "[0, 8]}, \"a\": {" + w + "[8, 16]}}");
  EXPECT_ERROR_HAS(err, "duplicate tensor name 'a'");
}

TEST(SafetensorsCorrupt, EveryTruncatedPrefixFailsCleanly) {
  auto full = build_safetensors({{"x", "F32", {2, 2}, encode_floats({1, 2, 3, 4}, "F32")},
                                 {"y", "BF16", {3}, encode_floats({1, 2, 3}, "BF16")}},
                                {{"format", "pt"}});
  ASSERT_EQ(parse_error(full), "<parsed OK>");
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<long>(n));
    EXPECT_NE(parse_error(prefix), "<parsed OK>") << n;
  }
}

// ---- model folders ----

namespace {
std::string make_dir() { return temp_dir(); }
}  // namespace

TEST(SafetensorsModel, SingleFile) {
  const std::string dir = make_dir();
  write_bytes(dir + "/model.safetensors",
              build_safetensors({{"z", "F32", {1}, encode_floats({1}, "F32")},
                                 {"a", "F16", {2}, encode_floats({2, 3}, "F16")}}));
  auto m = SafetensorsModel::open(dir);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_FALSE(m->sharded());
  EXPECT_EQ(m->names(), (std::vector<std::string>{"a", "z"}));  // sorted like safe_open().keys()
  auto r = m->find("a");
  ASSERT_TRUE(r.has_value());
  float out[2];
  ASSERT_TRUE(r->file->read_f32(*r->tensor, out).ok());
  EXPECT_EQ(out[1], 3.0f);
  EXPECT_FALSE(m->find("b").has_value());
}

TEST(SafetensorsModel, Sharded) {
  const std::string dir = make_dir();
  write_bytes(dir + "/model-00002-of-00002.safetensors",
              build_safetensors({{"c", "F32", {1}, encode_floats({3}, "F32")}}));
  write_bytes(dir + "/model-00001-of-00002.safetensors",
              build_safetensors({{"b", "F32", {1}, encode_floats({2}, "F32")},
                                 {"a", "F32", {1}, encode_floats({1}, "F32")}}));
  write_bytes(dir + "/model.safetensors",  // a stale single file must be ignored when an index exists
              build_safetensors({{"stale", "F32", {1}, encode_floats({9}, "F32")}}));
  const std::string index = R"({"metadata": {"total_size": 12}, "weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})";
  write_bytes(dir + "/model.safetensors.index.json", std::vector<uint8_t>(index.begin(), index.end()));
  auto m = SafetensorsModel::open(dir);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_TRUE(m->sharded());
  EXPECT_EQ(m->files().size(), 2u);
  EXPECT_EQ(m->names(), (std::vector<std::string>{"a", "b", "c"}));
  auto c = m->find("c");
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(c->file->path().find("model-00002-of-00002"), std::string::npos);
  EXPECT_FALSE(m->find("stale").has_value());
}

TEST(SafetensorsModel, BadFolders) {
  auto open_err = [](const std::string& dir) {
    auto m = SafetensorsModel::open(dir);
    return m.ok() ? std::string("<opened OK>") : m.error();
  };
  auto write_index = [](const std::string& dir, const std::string& s) {
    write_bytes(dir + "/model.safetensors.index.json", std::vector<uint8_t>(s.begin(), s.end()));
  };
  std::string dir = make_dir();
  EXPECT_ERROR_HAS(open_err(dir), "has neither model.safetensors nor model.safetensors.index.json");
  write_bytes(dir + "/pytorch_model.bin", {1, 2, 3});
  EXPECT_ERROR_HAS(open_err(dir), "PyTorch .bin checkpoints are not supported");

  dir = make_dir();
  write_index(dir, "{not json");
  EXPECT_ERROR_HAS(open_err(dir), "not a JSON object");
  write_index(dir, R"({"weight_map": {}})");
  EXPECT_ERROR_HAS(open_err(dir), "missing or empty \"weight_map\"");
  write_index(dir, R"({"weight_map": {"a": "../evil.safetensors"}})");
  EXPECT_ERROR_HAS(open_err(dir), "is not a file name in the model folder");
  write_index(dir, R"({"weight_map": {"a": "s1.safetensors"}})");
  EXPECT_ERROR_HAS(open_err(dir), "s1.safetensors");  // missing shard: cannot open
  write_bytes(dir + "/s1.safetensors", build_safetensors({{"b", "F32", {1}, encode_floats({1}, "F32")}}));
  EXPECT_ERROR_HAS(open_err(dir), "tensor 'a' is listed in s1.safetensors but that file has no such tensor");
  write_bytes(dir + "/s2.safetensors", build_safetensors({{"a", "F32", {1}, encode_floats({1}, "F32")},
                                                          {"b", "F32", {1}, encode_floats({1}, "F32")}}));
  write_index(dir, R"({"weight_map": {"a": "s2.safetensors", "b": "s1.safetensors"}})");
  EXPECT_ERROR_HAS(open_err(dir), "tensor 'b' is in both");
  write_bytes(dir + "/s1.safetensors", std::vector<uint8_t>{5, 0, 0, 0, 0, 0, 0, 0, '{', '}'});
  EXPECT_ERROR_HAS(open_err(dir), "s1.safetensors: truncated file");
}
