// The lattice i-quant GEMM kernels (kernel table iq_gemm, kernels/kernel_abi.h) on random blocks:
// every ISA's kernel gives the scalar kernel's bits (same integer sums, same float steps), and the
// scalar kernel equals the dequantized weights (quant/quant.h, the oracle checked against llama.cpp)
// times the dequantized int8 activations, up to float rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "isa_levels.h"
#include "kernels/dispatch.h"
#include "kernels/kernel_table.h"
#include "quant/quant.h"

using namespace tmill;
using namespace tmill::kern;

namespace {

const DType kTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
                        DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M};

std::vector<uint8_t> random_rows(DType t, int rows, int nb, uint32_t seed) {
  std::mt19937 rng(seed);
  const int bb = static_cast<int>(dtype_info(t).type_size);
  std::vector<uint8_t> w(static_cast<size_t>(rows * nb * bb));
  for (auto& v : w) v = static_cast<uint8_t>(rng() >> 24);
  for (int b = 0; b < rows * nb; ++b) {
    uint8_t* p = w.data() + b * bb;
    const auto d = static_cast<uint16_t>(0x2c00 + (rng() & 0x3ff));
    if (t == DType::IQ1_M) {
      for (int k = 0; k < 4; ++k) p[49 + 2 * k] = static_cast<uint8_t>((p[49 + 2 * k] & 15) | (((d >> (4 * k)) & 15) << 4));
    } else {
      std::memcpy(p, &d, 2);
    }
  }
  return w;
}

// Several tiles in one call (the kernels may decode a row group once for all of them), row ranges
// that are not multiples of 16 and do not start at 0.
TEST(IqGemm, EveryIsaMatchesScalarBitwiseAndTheDequantizedProduct) {
  const int rows = 37, nb = 3, cols = nb * 256;
  const size_t tile_bytes = static_cast<size_t>(nb) * kTile * kQ8KRecordBytes;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  for (DType t : kTypes) {
    const int kind = iq_kind(t);
    ASSERT_GE(kind, 0);
    const size_t rb = static_cast<size_t>(nb) * dtype_info(t).type_size;
    const std::vector<uint8_t> w = random_rows(t, rows, nb, 100 + kind);
    std::vector<float> wf(static_cast<size_t>(rows * cols));
    for (int r = 0; r < rows; ++r) dequantize_row(t, w.data() + r * rb, wf.data() + r * cols, cols);
    for (int n : {1, 3, kTile, 2 * kTile + 3}) {
      std::vector<float> x(static_cast<size_t>(n * cols));
      for (auto& v : x) v = nd(rng);
      const int tiles = (n + kTile - 1) / kTile;
      std::vector<uint8_t> act(static_cast<size_t>(tiles) * tile_bytes);
      auto tile_tokens = [&](int i) { return std::min(kTile, n - i * kTile); };
      for (int i = 0; i < tiles; ++i)
        quant_act_q8k_scalar(x.data() + i * kTile * cols, cols, tile_tokens(i), cols, act.data() + i * tile_bytes);
      const int ldy = rows + 2;
      std::vector<float> y0(static_cast<size_t>(n * ldy), -1.0f);
      kernel_table(Isa::Scalar).iq_gemm[kind](w.data(), rb, nb, 0, rows, act.data(), tile_bytes, n, y0.data(), ldy);
      // The oracle: dequantized weights times the records' activations (qs * d), in double.
      for (int tk = 0; tk < n; ++tk)
        for (int r = 0; r < rows; ++r) {
          const int T = tile_tokens(tk / kTile), tl = tk % kTile;
          double want = 0, mag = 0;
          for (int b = 0; b < nb; ++b) {
            const uint8_t* rec = act.data() + (tk / kTile) * tile_bytes + b * T * kQ8KRecordBytes;
            float dx;
            std::memcpy(&dx, rec + T * 256 + 4 * tl, 4);
            for (int i = 0; i < 256; ++i) {
              const double v = static_cast<double>(wf[r * cols + b * 256 + i]) *
                               static_cast<int8_t>(rec[256 * tl + i]) * dx;
              want += v;
              mag += std::fabs(v);
            }
          }
          EXPECT_NEAR(y0[tk * ldy + r], want, 1e-5 * mag + 1e-30) << dtype_name(t) << " n=" << n << " row " << r;
        }
      const bool fast_pdep = g_iq_fast_pdep;
      for (Isa isa : tmill::test::available_isas()) {
        for (bool pdep : {false, true}) {  // both ways of unpacking IQ1_S's / IQ2_S's / IQ3_S's indices
          g_iq_fast_pdep = pdep;
          for (const auto& [r0, r1] : {std::pair<int, int>{4, rows}, {0, rows}, {16, 32}, {5, 6}}) {
            std::vector<float> y(y0.size(), -1.0f);
            // The kernel must leave rows outside [r0, r1) alone.
            kernel_table(isa).iq_gemm[kind](w.data(), rb, nb, r0, r1, act.data(), tile_bytes, n, y.data(), ldy);
            for (int tk = 0; tk < n; ++tk)
              for (int r = 0; r < ldy; ++r) {
                const float want = (r >= r0 && r < r1) ? y0[tk * ldy + r] : -1.0f;
                ASSERT_EQ(std::memcmp(&y[tk * ldy + r], &want, 4), 0)
                    << dtype_name(t) << " " << isa_name(isa) << " n=" << n << " rows " << r0 << ".." << r1
                    << " token " << tk << " row " << r << " pdep " << pdep << ": " << y[tk * ldy + r] << " vs "
                    << want;
              }
          }
        }
      }
      g_iq_fast_pdep = fast_pdep;
    }
  }
}

}  // namespace
