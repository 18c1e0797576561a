// Corrupt GGUF files built byte by byte: each must be rejected with an Error naming the problem,
// never a crash (this suite also runs under ASan/UBSan).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "gguf_bytes.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::test;

namespace {

// Parses from a heap copy of exactly the file's size, so ASan sees any read past the end.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() + 1]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  auto r = GgufFile::parse(bytes.empty() ? nullptr : copy.get(), bytes.size());
  if (r.ok()) return "<parsed OK>";
  EXPECT_FALSE(r.error().empty());
  return r.error();
}

std::string spec_error(const FileSpec& s) { return parse_error(build_gguf(s)); }

#define EXPECT_ERROR_HAS(err, phrase) EXPECT_NE((err).find(phrase), std::string::npos) << "error: " << (err)

}  // namespace

TEST(GgufCorrupt, BadMagic) {
  FileSpec s = valid_spec();
  s.magic = 0x46554746;  // "FGUF"
  EXPECT_ERROR_HAS(spec_error(s), "bad magic");
  EXPECT_ERROR_HAS(parse_error({'G', 'G'}), "too short");
  EXPECT_ERROR_HAS(parse_error({}), "too short");
}

TEST(GgufCorrupt, BadVersion) {
  FileSpec s = valid_spec();
  s.version = 0;
  EXPECT_ERROR_HAS(spec_error(s), "unsupported GGUF version 0");
  s.version = 1;
  EXPECT_ERROR_HAS(spec_error(s), "version 1 is not supported");
  s.version = 4;
  EXPECT_ERROR_HAS(spec_error(s), "unsupported GGUF version 4");
  s.version = 0x03000000;  // version 3 written big-endian
  EXPECT_ERROR_HAS(spec_error(s), "big-endian");
  s.version = 0x02000000;
  EXPECT_ERROR_HAS(spec_error(s), "big-endian");
  s.version = 2;  // v2 has the same layout as v3
  EXPECT_EQ(spec_error(s), "<parsed OK>");
}

TEST(GgufCorrupt, EveryTruncatedPrefixFailsCleanly) {
  const auto full = build_gguf(valid_spec());
  ASSERT_EQ(parse_error(full), "<parsed OK>");
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<long>(n));
    const std::string err = parse_error(prefix);
    EXPECT_NE(err, "<parsed OK>") << "prefix of " << n << " bytes parsed";
  }
}

TEST(GgufCorrupt, TruncatedData) {
  FileSpec s = valid_spec();
  s.data_bytes = 32 + 67;  // tensor b needs 68 bytes at offset 32
  const std::string err = spec_error(s);
  EXPECT_ERROR_HAS(err, "truncated");
  EXPECT_ERROR_HAS(err, "'b'");
}

TEST(GgufCorrupt, TensorOffsetPastTheEnd) {
  FileSpec s = valid_spec();
  s.tensors[1].offset = 4096;
  const std::string err = spec_error(s);
  EXPECT_ERROR_HAS(err, "past the end");
  EXPECT_ERROR_HAS(err, "'b'");
  s.tensors[1].offset = ~0ull - 31;  // aligned, and offset + size wraps around
  EXPECT_ERROR_HAS(spec_error(s), "overflow");
}

// Two tensors sharing bytes: one's data read as another's, of another type and shape.
TEST(GgufCorrupt, OverlappingTensorsAreRefused) {
  FileSpec s = valid_spec();
  s.tensors[1].offset = 0;  // b (68 bytes) over a (32 bytes)
  std::string err = spec_error(s);
  EXPECT_ERROR_HAS(err, "overlap");
  EXPECT_ERROR_HAS(err, "'a'");
  EXPECT_ERROR_HAS(err, "'b'");
  s = valid_spec();  // a after b, still overlapping b's tail
  s.tensors[0].offset = 64;
  s.data_bytes = 128;
  EXPECT_ERROR_HAS(spec_error(s), "overlap");
  s.tensors[0].offset = 128;  // a after b, apart: fine
  s.data_bytes = 160;
  EXPECT_EQ(spec_error(s), "<parsed OK>");
}

TEST(GgufCorrupt, SizeOverflow) {
  FileSpec s = valid_spec();
  s.tensors[0].dims = {1ull << 32, 1ull << 32};  // 2^64 elements
  EXPECT_ERROR_HAS(spec_error(s), "overflow");
  s.tensors[0].dims = {1ull << 62, 2};  // 2^63: does not fit int64
  EXPECT_ERROR_HAS(spec_error(s), "overflow");
  s.tensors[0].dims = {1ull << 62};  // fits int64, but 4 bytes each overflows u64 bytes
  EXPECT_ERROR_HAS(spec_error(s), "overflow");
  s.tensors[0].dims = {1ull << 63};  // > INT64_MAX
  EXPECT_ERROR_HAS(spec_error(s), "invalid dimension");
}

TEST(GgufCorrupt, DuplicateKeyAndTensorName) {
  FileSpec s = valid_spec();
  s.kvs.push_back({"test.n", 4, encode_u32(8)});
  EXPECT_ERROR_HAS(spec_error(s), "duplicate metadata key 'test.n'");
  s = valid_spec();
  s.tensors[1].name = "a";
  EXPECT_ERROR_HAS(spec_error(s), "duplicate tensor name 'a'");
}

TEST(GgufCorrupt, UnknownValueTypes) {
  FileSpec s = valid_spec();
  s.kvs.push_back({"x.bad", 13, encode_u32(1)});
  EXPECT_ERROR_HAS(spec_error(s), "unknown value type 13");
  s = valid_spec();
  s.kvs.push_back({"x.arr", 9, Bytes().u32(0xffffffffu).u64(1).u32(0).vec()});
  EXPECT_ERROR_HAS(spec_error(s), "unknown array element type");
  s = valid_spec();
  s.kvs.push_back({"x.bool", 7, {2}});
  EXPECT_ERROR_HAS(spec_error(s), "invalid bool");
}

TEST(GgufCorrupt, UnknownTensorType) {
  FileSpec s = valid_spec();
  s.tensors[0].type = 4;  // Q4_2: removed from ggml long ago
  EXPECT_ERROR_HAS(spec_error(s), "unknown tensor type id 4");
  s.tensors[0].type = 1000;
  EXPECT_ERROR_HAS(spec_error(s), "unknown tensor type id 1000");
}

TEST(GgufCorrupt, AbsurdLengthsAndCounts) {
  FileSpec s = valid_spec();
  s.kvs.push_back({"x.arr", 9, Bytes().u32(4).u64(1ull << 62).vec()});  // u32 array of 2^62
  EXPECT_ERROR_HAS(spec_error(s), "absurd array length");
  s = valid_spec();
  s.kvs.push_back({"x.arr", 9, Bytes().u32(8).u64(1ull << 62).vec()});  // string array
  EXPECT_ERROR_HAS(spec_error(s), "absurd array length");
  s = valid_spec();
  s.kvs.push_back({"x.arr", 9, Bytes().u32(9).u64(1ull << 62).vec()});  // array of arrays
  EXPECT_ERROR_HAS(spec_error(s), "absurd array length");
  s = valid_spec();
  s.kvs.push_back({"x.s", 8, Bytes().u64(1ull << 62).vec()});
  EXPECT_ERROR_HAS(spec_error(s), "absurd length");
  s = valid_spec();
  s.kvs.push_back({"x.s", 8, Bytes().u64(1000).vec()});  // plausible but past the end
  EXPECT_ERROR_HAS(spec_error(s), "truncated");
  s = valid_spec();
  s.n_kv_override = 1ull << 62;
  EXPECT_ERROR_HAS(spec_error(s), "absurd metadata count");
  s = valid_spec();
  s.n_tensors_override = 1ull << 62;
  EXPECT_ERROR_HAS(spec_error(s), "absurd tensor count");
}

TEST(GgufCorrupt, DeeplyNestedArrays) {
  Bytes b;
  for (int i = 0; i < 20; ++i) b.u32(9).u64(1);
  b.u32(4).u64(0);
  FileSpec s = valid_spec();
  s.kvs.push_back({"x.deep", 9, b.vec()});
  EXPECT_ERROR_HAS(spec_error(s), "nested deeper");
}

TEST(GgufCorrupt, MisalignedDataOffset) {
  FileSpec s = valid_spec();
  s.tensors[1].offset = 33;
  EXPECT_ERROR_HAS(spec_error(s), "misaligned data offset 33");
}

TEST(GgufCorrupt, BadAlignmentKey) {
  for (uint32_t al : {0u, 3u, 48u}) {
    FileSpec s = valid_spec();
    s.kvs.push_back({"general.alignment", 4, encode_u32(al)});
    EXPECT_ERROR_HAS(spec_error(s), "not a power of two");
  }
  // A power of two, but absurd: readers and writers would pad by up to 1 GiB (found by fuzz_gguf).
  for (uint32_t al : {1u << 21, 1u << 30, 1u << 31}) {
    FileSpec s = valid_spec();
    s.kvs.push_back({"general.alignment", 4, encode_u32(al)});
    EXPECT_ERROR_HAS(spec_error(s), "larger than the 1048576 bytes");
  }
  FileSpec s = valid_spec();
  s.kvs.push_back({"general.alignment", 10, Bytes().u64(32).vec()});  // u64, not u32
  EXPECT_ERROR_HAS(spec_error(s), "general.alignment must be a u32");
  // A valid custom alignment moves the data section.
  s = valid_spec();
  s.kvs.push_back({"general.alignment", 4, encode_u32(64)});
  s.tensors[1].offset = 64;
  s.pad_alignment = 64;
  s.data_bytes = 64 + 68;
  EXPECT_EQ(spec_error(s), "<parsed OK>");
  s.tensors[1].offset = 32;  // aligned to 32 but not to the declared 64
  EXPECT_ERROR_HAS(spec_error(s), "misaligned");
}

TEST(GgufCorrupt, BadDimensions) {
  FileSpec s = valid_spec();
  s.tensors[0].dims = {};
  EXPECT_ERROR_HAS(spec_error(s), "0 dimensions");
  s.tensors[0].dims = {8, 1, 1, 1, 1};
  EXPECT_ERROR_HAS(spec_error(s), "5 dimensions");
  s.tensors[0].dims = {8};
  s.tensors[0].n_dims_override = 1000000;
  EXPECT_ERROR_HAS(spec_error(s), "1000000 dimensions");
  s = valid_spec();
  s.tensors[0].dims = {8, 0};
  EXPECT_ERROR_HAS(spec_error(s), "invalid dimension 0");
}

TEST(GgufCorrupt, RowLengthNotMultipleOfBlockSize) {
  FileSpec s = valid_spec();
  s.tensors[1].dims = {16, 4};  // Q8_0 blocks hold 32 elements; 64 elements in total, rows of 16
  EXPECT_ERROR_HAS(spec_error(s), "row length 16 is not a multiple of the Q8_0 block size 32");
}

TEST(GgufCorrupt, EmptyNames) {
  FileSpec s = valid_spec();
  s.kvs[0].key = "";
  EXPECT_ERROR_HAS(spec_error(s), "empty");
  s = valid_spec();
  s.tensors[0].name = "";
  EXPECT_ERROR_HAS(spec_error(s), "empty name");
}

// A huge (sparse) file whose header claims 2^32 metadata pairs and an array of 2^31 strings: the counts
// are plausible for the file size, so the reader must not allocate for them up front.
TEST(GgufCorrupt, HugeClaimedCountsInHugeFileDoNotAllocateUpFront) {
  for (int variant = 0; variant < 2; ++variant) {
    FileSpec s;
    if (variant == 0) {
      s.n_kv_override = 1ull << 32;
    } else {
      // Key "x" holding a string array of 2^31 elements; the first element has an absurd length.
      s.kvs.push_back({"x", 9, Bytes().u32(8).u64(1ull << 31).u64(1ull << 62).vec()});
    }
    auto bytes = build_gguf(s);
    const std::string path = temp_dir() + "/sparse.gguf";
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(::ftruncate(fd, 64ll << 30), 0);  // 64 GiB of zeros, no disk used
    ::close(fd);
    auto r = GgufFile::open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_ERROR_HAS(r.error(), path);
    EXPECT_ERROR_HAS(r.error(), variant == 0 ? "empty" : "absurd length");
  }
}
