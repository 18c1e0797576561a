// Importance matrix in memory: accumulated squared activations and counts, and the per-column
// importance the quantizers take (files: tests/unit/convert/imatrix_file_test.cpp).
#include <gtest/gtest.h>

#include "quant/imatrix.h"

namespace tmill {
namespace {

TEST(Imatrix, AccumulateSumsSquaresAndCounts) {
  Imatrix m;
  const float x[2][3] = {{1, 2, 3}, {-1, 0, 0.5f}};
  m.accumulate("blk.0.attn_q.weight", &x[0][0], 2, 3);
  m.accumulate("blk.0.attn_q.weight", &x[1][0], 1, 3);
  const ImatrixEntry& e = m.entries.at("blk.0.attn_q.weight");
  EXPECT_EQ(e.counts, std::vector<float>({3.0f}));
  EXPECT_EQ(e.sums, std::vector<float>({3.0f, 4.0f, 9.5f}));  // 1+1+1, 4+0+0, 9+0.25+0.25
  auto imp = m.importance("blk.0.attn_q.weight");
  ASSERT_TRUE(imp.has_value());
  EXPECT_FLOAT_EQ((*imp)[0], 1.0f);
  EXPECT_FLOAT_EQ((*imp)[1], 4.0f / 3.0f);
  EXPECT_FLOAT_EQ((*imp)[2], 9.5f / 3.0f);
  EXPECT_FALSE(m.importance("output.weight").has_value());
}

TEST(Imatrix, PerExpertMatricesAndZeroCounts) {
  Imatrix m;
  const float a[2] = {2, 4};
  m.accumulate("blk.0.ffn_up_exps.weight", a, 1, 2, /*mat=*/1, /*n_mat=*/3);
  auto imp = m.importance("blk.0.ffn_up_exps.weight");
  ASSERT_TRUE(imp.has_value());
  // Experts 0 and 2 never saw a token: importance 1 (neutral), as llama.cpp does.
  EXPECT_EQ(*imp, std::vector<float>({1, 1, 4, 16, 1, 1}));
}

}  // namespace
}  // namespace tmill
