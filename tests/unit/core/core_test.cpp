#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/mmap.h"
#include "core/strings.h"
#include "core/thread_pool.h"

using namespace tmill;

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(fp32_to_fp16(f), h) << "half " << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even).
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-65519.0f), 0xfbff);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Bf16, RoundTripAndRounding) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::nanf("")))));
}

TEST(DType, SizesMatchGgml) {
  EXPECT_EQ(dtype_info(DType::Q4_K).type_size, 144);
  EXPECT_EQ(dtype_info(DType::Q6_K).type_size, 210);
  EXPECT_EQ(dtype_info(DType::Q8_0).type_size, 34);
  EXPECT_EQ(dtype_info(DType::BF16).type_size, 2);
  EXPECT_EQ(dtype_info(4u), nullptr);
  EXPECT_EQ(dtype_info(1000u), nullptr);
  EXPECT_EQ(dtype_from_name("q4_k"), DType::Q4_K);
  EXPECT_FALSE(dtype_from_name("q4_x").has_value());
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_FALSE(dtype_row_bytes(DType::Q8_0, 33).has_value());
  EXPECT_FALSE(dtype_row_bytes(DType::F32, 1ull << 63).has_value());
}

TEST(Strings, ParseSize) {
  EXPECT_EQ(*parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(*parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(*parse_size("1.5g"), 3ull << 29);
  EXPECT_EQ(*parse_size("1000"), 1000u);
  EXPECT_EQ(*parse_size("1GB"), 1000000000u);
  EXPECT_FALSE(parse_size("12 parsecs").ok());
  EXPECT_FALSE(parse_size("-1G").ok());
}

TEST(Strings, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("hello 世界 🦙"));
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xe4\xb8"));      // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\x80"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));  // surrogate
}

// Dropping a mapping's resident pages is only a hint: the contents read afterwards are the file's.
TEST(MappedFile, DropResidentPagesKeepsContents) {
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 24);
  const std::string path = ::testing::TempDir() + "tm_mmap_drop.bin";
  ASSERT_TRUE(write_file(path, data.data(), data.size()).ok());
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->size(), data.size());
  EXPECT_EQ(std::memcmp(f->data(), data.data(), data.size()), 0);
  f->drop_resident_pages();
  EXPECT_EQ(std::memcmp(f->data(), data.data(), data.size()), 0);
  std::remove(path.c_str());
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> hits(1000);
      pool.parallel_for(1000, 7, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, RunCallsEveryThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> seen(3);
  pool.run([&](int tid, int n) {
    EXPECT_EQ(n, 3);
    seen[tid].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}
