// llama.cpp's split GGUF: shard names, and the checks that the shards belong together.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_split.h"
#include "test_support.h"

using namespace tmill;

namespace {
#define EXPECT_ERROR_HAS(err, phrase) EXPECT_NE((err).find(phrase), std::string::npos) << "error: " << (err)

// Shard `no` (0-based) of `count`, with `tensors` one-float tensors named by the strings.
void write_shard(const std::string& path, int no, int count, int total, const std::vector<std::string>& tensors) {
  GgufWriter w;
  if (no == 0) w.set_string("general.architecture", "llama");
  w.set("split.no", GgufValue::u16(static_cast<uint16_t>(no)));
  w.set("split.count", GgufValue::u16(static_cast<uint16_t>(count)));
  w.set("split.tensors.count", GgufValue::i32(total));
  static const float one = 1.0f;
  for (const auto& t : tensors) ASSERT_TRUE(w.add_tensor(t, DType::F32, {1}, &one).ok());
  ASSERT_TRUE(w.write(path).ok());
}
}  // namespace

TEST(GgufSplit, ShardNames) {
  auto p = gguf_split_paths("/m/qwen-7b-00002-of-00003.gguf");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (std::vector<std::string>{"/m/qwen-7b-00001-of-00003.gguf", "/m/qwen-7b-00002-of-00003.gguf",
                                          "/m/qwen-7b-00003-of-00003.gguf"}));
  for (const char* not_split : {"/m/qwen.gguf", "/m/q-00001-of-00001.gguf", "/m/q-00004-of-00003.gguf",
                                "/m/q-0001-of-00003.gguf", "/m/q-00001-of-00003.bin", "/m/q_00001-of-00002.gguf"})
    EXPECT_FALSE(gguf_split_paths(not_split).has_value()) << not_split;
}

TEST(GgufSplit, OpensShardsAndChecksThem) {
  const std::string d = test::temp_dir();
  write_shard(d + "/m-00001-of-00002.gguf", 0, 2, 3, {"a", "b"});
  write_shard(d + "/m-00002-of-00002.gguf", 1, 2, 3, {"c"});
  auto shards = open_gguf_split(d + "/m-00002-of-00002.gguf");
  ASSERT_TRUE(shards.ok()) << shards.error();
  ASSERT_EQ(shards->size(), 2u);
  EXPECT_EQ((*shards)[1].tensors()[0].name, "c");

  write_shard(d + "/t-00001-of-00002.gguf", 0, 2, 4, {"a", "b"});  // says 4 tensors, the shards hold 3
  write_shard(d + "/t-00002-of-00002.gguf", 1, 2, 4, {"c"});
  auto count = open_gguf_split(d + "/t-00001-of-00002.gguf");
  ASSERT_FALSE(count.ok());
  EXPECT_ERROR_HAS(count.error(), "split.tensors.count is 4 but the 2 shards hold 3 tensors");

  write_shard(d + "/s-00001-of-00002.gguf", 0, 2, 3, {"a", "b"});
  write_shard(d + "/s-00002-of-00002.gguf", 0, 2, 3, {"c"});  // split.no says shard 1
  auto no = open_gguf_split(d + "/s-00001-of-00002.gguf");
  ASSERT_FALSE(no.ok());
  EXPECT_ERROR_HAS(no.error(), "split.no 0 / split.count 2 do not match its name (shard 2 of 2)");

  write_shard(d + "/u-00001-of-00002.gguf", 0, 2, 3, {"a", "b"});
  write_shard(d + "/u-00002-of-00002.gguf", 1, 2, 3, {"a"});
  auto twice = open_gguf_split(d + "/u-00001-of-00002.gguf");
  ASSERT_FALSE(twice.ok());
  EXPECT_ERROR_HAS(twice.error(), "tensor a is also in an earlier shard");

  write_shard(d + "/v-00001-of-00003.gguf", 0, 3, 3, {"a", "b"});
  auto missing = open_gguf_split(d + "/v-00001-of-00003.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_ERROR_HAS(missing.error(), "shard 2 of 3 is missing: " + d + "/v-00002-of-00003.gguf");
}
