// Importance matrix files: save/load round trip in llama.cpp's GGUF layout, the legacy binary
// format, and rejection of malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <tuple>

#include "convert/imatrix_file.h"
#include "core/mmap.h"
#include "formats/gguf.h"
#include "test_support.h"

namespace tmill {
namespace {

TEST(ImatrixFile, SaveLoadRoundTripUsesLlamaCppLayout) {
  Imatrix m;
  m.datasets = {"wiki.train.raw", "code.txt"};
  m.chunk_count = 42;
  m.chunk_size = 512;
  m.entries["blk.0.attn_q.weight"] = {{1.5f, 2.5f, 0.0f, 8.0f}, {2.0f}};
  m.entries["blk.0.ffn_down_exps.weight"] = {{1, 2, 3, 4, 5, 6}, {1.0f, 0.0f, 3.0f}};
  const std::string path = test::temp_dir() + "/imatrix.gguf";
  ASSERT_TRUE(save_imatrix(m, path).ok());

  // The file itself: llama.cpp's names, types and shapes.
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->get_string("general.type"), "imatrix");
  EXPECT_EQ(f->get_int("imatrix.chunk_count"), 42);
  EXPECT_EQ(f->get_int("imatrix.chunk_size"), 512);
  ASSERT_NE(f->find("imatrix.datasets"), nullptr);
  EXPECT_EQ(*f->find("imatrix.datasets")->as_string_array(), m.datasets);
  const GgufTensorInfo* s = f->find_tensor("blk.0.attn_q.weight.in_sum2");
  const GgufTensorInfo* c = f->find_tensor("blk.0.attn_q.weight.counts");
  ASSERT_TRUE(s && c);
  EXPECT_EQ(s->type, DType::F32);
  EXPECT_EQ(s->ne, std::vector<int64_t>({4, 1}));
  EXPECT_EQ(c->ne, std::vector<int64_t>({1, 1}));
  const GgufTensorInfo* se = f->find_tensor("blk.0.ffn_down_exps.weight.in_sum2");
  ASSERT_TRUE(se);
  EXPECT_EQ(se->ne, std::vector<int64_t>({2, 3}));
  float v;
  std::memcpy(&v, c->data, 4);
  EXPECT_EQ(v, 2.0f);

  auto back = load_imatrix(path);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->datasets, m.datasets);
  EXPECT_EQ(back->chunk_count, 42);
  EXPECT_EQ(back->chunk_size, 512);
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries.at("blk.0.attn_q.weight").sums, m.entries["blk.0.attn_q.weight"].sums);
  EXPECT_EQ(back->entries.at("blk.0.ffn_down_exps.weight").counts, std::vector<float>({1, 0, 3}));
  EXPECT_EQ(*back->importance("blk.0.attn_q.weight"), std::vector<float>({0.75f, 1.25f, 0.0f, 4.0f}));
  EXPECT_EQ(*back->importance("blk.0.ffn_down_exps.weight"), std::vector<float>({1, 2, 1, 1, 5.0f / 3, 2}));
}

TEST(ImatrixFile, IgnoresOtherStatisticsTensors) {
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  const float sums[2] = {4, 9}, counts[1] = {2}, other[2] = {1, 1};
  ASSERT_TRUE(w.add_tensor("a.weight.in_sum2", DType::F32, {2, 1}, sums).ok());
  ASSERT_TRUE(w.add_tensor("a.weight.counts", DType::F32, {1, 1}, counts).ok());
  ASSERT_TRUE(w.add_tensor("a.weight.in_sum", DType::F32, {2, 1}, other).ok());
  const std::string path = test::temp_dir() + "/im.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto m = load_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(*m->importance("a.weight"), std::vector<float>({2, 4.5f}));
}

void put_i32(std::string& s, int32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }

TEST(ImatrixFile, ReadsLegacyDatFormat) {
  std::string b;
  put_i32(b, 2);
  for (auto [name, ncall, vals] : {std::tuple{std::string("blk.0.attn_k.weight"), 4, std::vector<float>{8, 4}},
                                   std::tuple{std::string("output.weight"), 0, std::vector<float>{0.5f, 2, 3}}}) {
    put_i32(b, static_cast<int32_t>(name.size()));
    b += name;
    put_i32(b, ncall);
    put_i32(b, static_cast<int32_t>(vals.size()));
    b.append(reinterpret_cast<const char*>(vals.data()), vals.size() * 4);
  }
  put_i32(b, 17);  // last chunk
  put_i32(b, 8);
  b += "data.txt";
  const std::string path = test::temp_dir() + "/legacy.dat";
  ASSERT_TRUE(write_file(path, b.data(), b.size()).ok());
  auto m = load_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->chunk_count, 17);
  EXPECT_EQ(m->datasets, std::vector<std::string>({"data.txt"}));
  EXPECT_EQ(*m->importance("blk.0.attn_k.weight"), std::vector<float>({2, 1}));
  EXPECT_EQ(*m->importance("output.weight"), std::vector<float>({0.5f, 2, 3}));  // ncall 0: as stored

  // Truncations are rejected, never read past the end.
  for (size_t cut : {size_t{2}, size_t{6}, size_t{30}, size_t{40}}) {
    const std::string p2 = test::temp_dir() + "/cut.dat";
    ASSERT_TRUE(write_file(p2, b.data(), cut).ok());
    EXPECT_FALSE(load_imatrix(p2).ok()) << cut;
  }
}

TEST(ImatrixFile, RejectsBadFiles) {
  const std::string dir = test::temp_dir();
  {
    GgufWriter w;
    w.set_string("general.type", "model");
    ASSERT_TRUE(w.write(dir + "/model.gguf").ok());
    EXPECT_FALSE(load_imatrix(dir + "/model.gguf").ok());
  }
  {
    GgufWriter w;
    const float sums[3] = {1, 2, 3}, counts[2] = {1, 1};
    ASSERT_TRUE(w.add_tensor("a.weight.in_sum2", DType::F32, {3, 1}, sums).ok());
    ASSERT_TRUE(w.add_tensor("a.weight.counts", DType::F32, {1, 2}, counts).ok());
    ASSERT_TRUE(w.write(dir + "/mismatch.gguf").ok());
    EXPECT_FALSE(load_imatrix(dir + "/mismatch.gguf").ok());
  }
  {
    GgufWriter w;
    const float sums[2] = {1, NAN}, counts[1] = {1};
    ASSERT_TRUE(w.add_tensor("a.weight.in_sum2", DType::F32, {2, 1}, sums).ok());
    ASSERT_TRUE(w.add_tensor("a.weight.counts", DType::F32, {1, 1}, counts).ok());
    ASSERT_TRUE(w.write(dir + "/nan.gguf").ok());
    EXPECT_FALSE(load_imatrix(dir + "/nan.gguf").ok());
  }
  {
    GgufWriter w;
    const float sums[2] = {1, 2};
    ASSERT_TRUE(w.add_tensor("a.weight.in_sum2", DType::F32, {2, 1}, sums).ok());  // no counts
    ASSERT_TRUE(w.write(dir + "/nocounts.gguf").ok());
    EXPECT_FALSE(load_imatrix(dir + "/nocounts.gguf").ok());
  }
  EXPECT_FALSE(load_imatrix(dir + "/missing.gguf").ok());
}

}  // namespace
}  // namespace tmill
