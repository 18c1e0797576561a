// llama.cpp's KL-divergence base file (eval/kld_base.h): encoding a logits row as llama-perplexity does,
// reading the file back (and refusing damaged ones), and KL divergence against a 16-bit row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "eval/divergence.h"
#include "eval/kld_base.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::eval;

namespace {

std::vector<float> random_logits(int64_t n, uint32_t seed, float spread = 4.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

std::string write_base(const std::string& name, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                       std::vector<std::vector<float>>* rows_out = nullptr) {
  const std::string path = test::temp_dir() + "/" + name;
  std::vector<int32_t> tokens(static_cast<size_t>(n_ctx * n_chunk));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(n_vocab));
  auto w = KldBaseWriter::create(path, n_ctx, n_vocab, tokens);
  EXPECT_TRUE(w.ok()) << w.error();
  for (int64_t r = 0; r < n_chunk * kld_rows_per_chunk(n_ctx); ++r) {
    auto row = random_logits(n_vocab, static_cast<uint32_t>(r + 1));
    EXPECT_TRUE(w->add_row(row.data(), static_cast<int32_t>(r % n_vocab)).ok());
    if (rows_out) rows_out->push_back(row);
  }
  auto st = w->close();
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

}  // namespace

TEST(KldBase, RowSlotsAndRowsPerChunkAsLlamaPerplexity) {
  EXPECT_EQ(kld_row_slots(32000), 32004);
  EXPECT_EQ(kld_row_slots(151937), 151942);  // odd vocabularies are padded to even
  EXPECT_EQ(kld_rows_per_chunk(512), 255);
  EXPECT_EQ(kld_rows_per_chunk(64), 31);
}

TEST(KldBase, EncodedRowDecodesToTheLogProbabilitiesWithinTheQuantizationStep) {
  const int64_t V = 1001;
  auto logits = random_logits(V, 42);
  std::vector<uint16_t> row(static_cast<size_t>(kld_row_slots(V)));
  const int32_t top = argmax(logits.data(), V);
  const double nll = encode_kld_row(logits.data(), V, top, row.data());
  EXPECT_NEAR(nll, token_nll(logits.data(), V, top), 1e-5);
  KldBaseRow r;
  std::memcpy(&r.scale, row.data(), 4);
  std::memcpy(&r.min_log_prob, row.data() + 2, 4);
  r.q = row.data() + 4;
  const double lse = log_sum_exp(logits.data(), V);
  float mx = logits[0];
  for (float x : logits) mx = std::max(mx, x);
  for (int64_t i = 0; i < V; ++i) {
    const double want = logits[i] - lse;
    if (logits[i] > mx - 16) {
      EXPECT_NEAR(r.log_prob(i), want, r.scale) << i;  // half a step of rounding, plus float error
    } else {
      EXPECT_EQ(r.q[i], 0) << i;  // clamped at max - 16
    }
  }
  // Self-comparison: the 16-bit rounding alone. Rounding errors of up to half a step (16/65535/2 nats)
  // enter the sum to first order (the decoded row is not exactly normalized), so the floor is ~1e-5,
  // below the 1e-4 the issue asks of real comparisons; llama-perplexity has the same floor.
  const TokenComparison c = compare_token_base(r, logits.data(), V, top);
  EXPECT_LT(c.kld, 5e-5);
  EXPECT_TRUE(c.same_top1);
  EXPECT_NEAR(c.nll_ref, c.nll_model, 1e-3);
  // A token below the clamp (max - 16) reads back as the clamp, as in llama.cpp.
  int32_t low = 0;
  for (int64_t i = 0; i < V; ++i)
    if (logits[i] < logits[low]) low = static_cast<int32_t>(i);
  ASSERT_LT(logits[low], logits[top] - 16);
  EXPECT_NEAR(compare_token_base(r, logits.data(), V, low).nll_ref, -r.min_log_prob, 1e-6);
  // Against a different distribution: close to the exact KL divergence.
  auto other = random_logits(V, 43);
  const TokenComparison exact = compare_token(logits.data(), other.data(), V, 17);
  const TokenComparison approx = compare_token_base(r, other.data(), V, 17);
  EXPECT_GT(exact.kld, 1.0);
  EXPECT_NEAR(approx.kld, exact.kld, 1e-3 * exact.kld);
}

TEST(KldBase, FlatRowHasZeroScale) {
  std::vector<float> flat(10, 1.5f);
  std::vector<uint16_t> row(static_cast<size_t>(kld_row_slots(10)), 7);
  encode_kld_row(flat.data(), 10, 0, row.data());
  float scale;
  std::memcpy(&scale, row.data(), 4);
  EXPECT_EQ(scale, 0.f);
  for (int i = 4; i < kld_row_slots(10); ++i) EXPECT_EQ(row[static_cast<size_t>(i)], 0);
}

TEST(KldBase, WrittenFileReadsBack) {
  std::vector<std::vector<float>> rows;
  const std::string path = write_base("kb-roundtrip.bin", 16, 33, 3, &rows);
  auto f = KldBaseFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->n_ctx(), 16);
  EXPECT_EQ(f->n_vocab(), 33);
  EXPECT_EQ(f->n_chunk(), 3);
  auto t = f->chunk_tokens(2);
  ASSERT_EQ(t.size(), 16u);
  EXPECT_EQ(t[5], static_cast<int32_t>((37 * 7 + 3) % 33));
  ASSERT_EQ(rows.size(), 3u * 7u);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t r = 0; r < 7; ++r) {
      const auto& logits = rows[static_cast<size_t>(c * 7 + r)];
      const TokenComparison cmp = compare_token_base(f->row(c, r), logits.data(), 33, 0);
      EXPECT_LT(cmp.kld, 5e-5) << c << " " << r;
    }
}

TEST(KldBase, DamagedFilesAreRefusedWithAReason) {
  const std::string good = write_base("kb-good.bin", 8, 10, 2);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto write = [](const std::string& name, const std::string& b) {
    const std::string p = test::temp_dir() + "/" + name;
    std::ofstream(p, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
    return p;
  };
  auto err = [](const std::string& p) {
    auto f = KldBaseFile::open(p);
    return f.ok() ? std::string("opened") : f.error();
  };
  EXPECT_NE(err(write("kb-trunc.bin", bytes.substr(0, bytes.size() - 2))).find("truncated"), std::string::npos);
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_NE(err(write("kb-magic.bin", magic)).find("not a llama.cpp KL-divergence base file"), std::string::npos);
  std::string tok = bytes;
  const int32_t bad = 10;  // == n_vocab
  std::memcpy(tok.data() + 20 + 4 * 3, &bad, 4);
  EXPECT_NE(err(write("kb-token.bin", tok)).find("outside the vocabulary"), std::string::npos);
  std::string hdr = bytes;
  const int32_t neg = -1;
  std::memcpy(hdr.data() + 16, &neg, 4);
  EXPECT_NE(err(write("kb-hdr.bin", hdr)).find("implausible header"), std::string::npos);
  EXPECT_NE(err(write("kb-short.bin", bytes.substr(0, 10))).find("not a llama.cpp"), std::string::npos);
  EXPECT_NE(err(test::temp_dir() + "/kb-missing.bin").find("kb-missing.bin"), std::string::npos);
}

TEST(KldBase, WriterRefusesWrongRowCounts) {
  const std::string path = test::temp_dir() + "/kb-count.bin";
  std::vector<int32_t> tokens(8, 1);
  auto w = KldBaseWriter::create(path, 8, 4, tokens);
  ASSERT_TRUE(w.ok());
  std::vector<float> row(4, 0.f);
  ASSERT_TRUE(w->add_row(row.data(), 0).ok());
  auto st = w->close();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("1 rows written, the header announces 3"), std::string::npos) << st.error();
  EXPECT_FALSE(KldBaseWriter::create(path, 8, 4, std::vector<int32_t>(7, 1)).ok());  // not whole chunks
}
