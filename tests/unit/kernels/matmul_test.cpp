// Fast matmul paths against the oracle (matmul_reference) for every weight type, forcing each ISA
// level the CPU has, with and without thread pools.
//
// Error bounds (u = 2^-24, K = columns, S = sum_c |W[r][c]| * |x[t][c]|):
//  * float weights, f32 arithmetic: both sides sum K rounded products in different orders, each within
//    K*u*S of the exact value (standard recursive-summation bound), so |fast - ref| <= 2*K*u*S.
//  * bf16 path (AVX-512, n_tokens >= 2, F16/BF16 weights): activations are rounded to bf16 (8 significant
//    bits, relative error <= 2^-8 each) and F16 weights too (another 2^-8):
//    |err| <= 2^-8 * S (BF16) or (2^-7 + 2^-16) * S (F16), plus 2*K*u*S.
//  * int8 activations (quantized weights): x is replaced by x^ = round(x * 127/amax) * amax/127 per block
//    (32 columns, 256 for K-quants), |x - x^| <= amax_block / 254 per element, hence
//    |W(x - x^)| <= sum_blocks amax_block/254 * sum_{c in block} |W[r][c]|  (rigorous, but loose).
//    A second, tight check recomputes x^ exactly as the kernels do and compares against
//    matmul_reference(W, x^): only float rounding remains. The kernels sum exact integer dot products
//    scaled per block, the oracle rounds each product, so 4*(K+16)*u*sum_c A_c*|x^_c| bounds the
//    difference, where A_c = max |W| over c's block (>= |w| and >= the K-quant block minimum that the
//    oracle subtracts). A wrong chunk, scale or zero point gives errors orders of magnitude above it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "isa_levels.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/pack.h"
#include "quant/quant.h"

#if defined(__x86_64__)
namespace tmill::kern {
void add_qgemm_legacy_amx_soft(KernelTable& t);  // amx_model_avx512.cpp (x86-64 builds only)
}
#endif

using namespace tmill;
using tmill::test::available_isas;
using tmill::test::IsaGuard;

namespace {

constexpr double kU = 1.0 / (1 << 24);

struct OwnedMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
};

OwnedMatrix make_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(rows * cols));
  for (auto& v : f) v = nd(rng);
  // A few rows with a different magnitude and a row of zeros exercise the scales.
  for (int64_t c = 0; c < cols && rows > 2; ++c) {
    f[static_cast<size_t>(cols + c)] *= 30.0f;
    f[static_cast<size_t>(2 * cols + c)] = 0.0f;
  }
  OwnedMatrix o;
  const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
  o.bytes.resize(rb * static_cast<size_t>(rows) + 64);
  if (iq_kind(t) >= 0) {
    // Lattice i-quants: random blocks (every grid index and sign bit random, more than quantized weights
    // would reach) with a sane fp16 scale (IQ1_M keeps it in the top nibbles of its four scale words).
    const int bb = static_cast<int>(dtype_info(t).type_size);
    for (size_t i = 0; i < o.bytes.size(); ++i) o.bytes[i] = static_cast<uint8_t>(rng() >> 24);
    for (int64_t b = 0; b < rows * cols / 256; ++b) {
      uint8_t* p = o.bytes.data() + b * bb;
      const auto d = static_cast<uint16_t>(0x2c00 + (rng() & 0x3ff));
      if (t == DType::IQ1_M) {
        for (int k = 0; k < 4; ++k) p[49 + 2 * k] = static_cast<uint8_t>((p[49 + 2 * k] & 15) | (((d >> (4 * k)) & 15) << 4));
      } else {
        std::memcpy(p, &d, 2);
      }
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, f.data() + r * cols, o.bytes.data() + r * rb, cols);
  }
  o.m.type = t;
  o.m.rows = rows;
  o.m.cols = cols;
  o.m.data = o.bytes.data();
  o.m.row_bytes = rb;
  o.m.name = "w";
  return o;
}

std::vector<float> make_x(int64_t n, int64_t ldx, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.05f, 4.0f);
  std::vector<float> x(static_cast<size_t>(n * ldx), std::nanf(""));  // padding must never be read
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c0 = 0; c0 < cols; c0 += 32) {
      const float s = ud(rng);
      for (int64_t c = c0; c < std::min(cols, c0 + 32); ++c) x[t * ldx + c] = nd(rng) * s;
    }
    if (t % 5 == 1)  // one all-zero block (amax = 0)
      for (int64_t c = 0; c < std::min<int64_t>(cols, 32); ++c) x[t * ldx + c] = 0.0f;
  }
  return x;
}

// Types whose activations are quantized per 256 columns (Q8K).
bool is_kquant(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
         t == DType::IQ4_XS || iq_kind(t) >= 0;
}
bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
// Types whose fast path quantizes the activations to int8 (the rest multiply in float).
bool is_int8_path(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 ||
         t == DType::IQ4_NL || t == DType::MXFP4 || is_kquant(t);
}

// x^ exactly as the activation quantizers compute it (f32 ops, round to nearest even).
std::vector<float> quantized_x(const std::vector<float>& x, int64_t n, int64_t ldx, int64_t cols, int64_t block) {
  std::vector<float> q(x);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c0 = 0; c0 < cols; c0 += block) {
      float amax = 0;
      for (int64_t c = c0; c < c0 + block; ++c) amax = std::max(amax, std::fabs(x[t * ldx + c]));
      const float id = amax > 0 ? 127.0f / amax : 0.0f;
      const float d = amax / 127.0f;
      for (int64_t c = c0; c < c0 + block; ++c)
        q[t * ldx + c] = std::nearbyint(x[t * ldx + c] * id) * d;
    }
  return q;
}

struct Case {
  DType type;
  int64_t rows, cols, n;
};

// Runs one case on the active ISA and checks both bounds. Returns the fast output for extra checks.
std::vector<float> check_case(const Case& k, ThreadPool* pool, const std::string& label) {
  const OwnedMatrix w = make_matrix(k.type, k.rows, k.cols, static_cast<uint32_t>(k.rows * 131 + k.cols));
  const int64_t ldx = k.cols + 3, ldy = k.rows + 5;
  const std::vector<float> x = make_x(k.n, ldx, k.cols, static_cast<uint32_t>(k.n * 7 + k.cols));
  const PreparedMatrix pm(w.m);
  std::vector<float> y(static_cast<size_t>(k.n * ldy), -12345.0f), ref(y.size()), ref_q(y.size());
  matmul(pm, x.data(), ldx, y.data(), ldy, k.n, pool);
  matmul_reference(w.m, x.data(), ldx, ref.data(), ldy, k.n);

  const bool quant = is_int8_path(k.type);
  const int64_t block = is_kquant(k.type) ? 256 : 32;
  std::vector<float> xq;
  if (quant) {
    xq = quantized_x(x, k.n, ldx, k.cols, block);
    matmul_reference(w.m, xq.data(), ldx, ref_q.data(), ldy, k.n);
  }
  const bool bf16_path = active_isa() >= Isa::Avx512 && k.n >= 2 && (k.type == DType::F16 || k.type == DType::BF16);

  std::vector<float> row(static_cast<size_t>(k.cols));
  int failures = 0;
  for (int64_t r = 0; r < k.rows && failures < 5; ++r) {
    get_row(w.m, r, row.data());
    for (int64_t t = 0; t < k.n && failures < 5; ++t) {
      const float* xt = x.data() + t * ldx;
      double S = 0;
      for (int64_t c = 0; c < k.cols; ++c) S += std::fabs(row[c]) * std::fabs(xt[c]);
      const double got = y[t * ldy + r], want = ref[t * ldy + r];
      double tol;
      if (!quant) {
        // bf16 keeps 8 significant bits: rounding to it has relative error <= 2^-8.
        const double rel = !bf16_path ? 0.0 : k.type == DType::BF16 ? 1.0 / 256 : 1.0 / 128 + 1.0 / 65536;
        tol = 2.0 * k.cols * kU * S + rel * S + 1e-30;
      } else {
        double act = 0, tight = 0;
        for (int64_t c0 = 0; c0 < k.cols; c0 += block) {
          double amax = 0, wsum = 0, wmax = 0;
          for (int64_t c = c0; c < c0 + block; ++c) {
            amax = std::max(amax, static_cast<double>(std::fabs(xt[c])));
            wsum += std::fabs(row[c]);
          }
          for (int64_t c = c0; c < c0 + block; ++c) {
            if (c % 32 == 0) {
              wmax = 0;
              for (int64_t i = c; i < c + 32; ++i) wmax = std::max(wmax, static_cast<double>(std::fabs(row[i])));
            }
            tight += wmax * std::fabs(xq[t * ldx + c]);
          }
          act += amax / 254.0 * wsum;
        }
        tol = 1.001 * act + 4.0 * (k.cols + 16) * kU * tight + 1e-30;
        const double tight_tol = 4.0 * (k.cols + 16) * kU * tight + 1e-30;
        const double got_q = ref_q[t * ldy + r];
        if (!(std::fabs(got - got_q) <= tight_tol)) {
          ++failures;
          ADD_FAILURE() << label << " tight: row " << r << " token " << t << " got " << got << " oracle(x^) " << got_q
                        << " tol " << tight_tol;
        }
      }
      if (!(std::fabs(got - want) <= tol)) {
        ++failures;
        ADD_FAILURE() << label << ": row " << r << " token " << t << " got " << got << " want " << want << " tol "
                      << tol;
      }
    }
  }
  // Nothing outside the output rows may be written.
  for (int64_t t = 0; t < k.n; ++t)
    for (int64_t r = k.rows; r < ldy; ++r)
      if (y[t * ldy + r] != -12345.0f) {
        ADD_FAILURE() << label << ": wrote padding at token " << t << " row " << r;
        return y;
      }
  return y;
}

class MatmulType : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulType, MatchesReferenceOnEveryIsaAndThreadCount) {
  const DType t = GetParam();
  std::vector<int64_t> cols_list;
  if (dtype_info(t).block_size == 256) cols_list = {256, 768};
  else if (is_float(t)) cols_list = {1, 17, 64, 172, 300};
  else cols_list = {32, 96, 512};
  const std::vector<int64_t> rows_list = {1, 5, 17, 33, 100};
  const std::vector<int64_t> n_list = {1, 2, 3, 7, 16, 33, 64};
  ThreadPool p2(2), p3(3);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    // Every n on a mid-size shape, every shape at n = 1 and n = 9, each with a different pool.
    for (int64_t n : n_list) {
      const Case c{t, 33, cols_list[cols_list.size() / 2], n};
      check_case(c, n % 2 ? &p2 : &p3, std::string(isa_name(isa)) + " n=" + std::to_string(n));
    }
    int i = 0;
    for (int64_t rows : rows_list)
      for (int64_t cols : cols_list)
        for (int64_t n : {int64_t{1}, int64_t{9}}) {
          ThreadPool* pool = (i % 3 == 0) ? nullptr : (i % 3 == 1 ? &p2 : &p3);
          ++i;
          check_case({t, rows, cols, n}, pool,
                     std::string(isa_name(isa)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                         " n=" + std::to_string(n));
        }
  }
}

TEST_P(MatmulType, ThreadCountsGiveIdenticalResults) {
  const DType t = GetParam();
  // The lattice i-quants share one task split (and MatchesReference runs them on pools): one is enough.
  if (iq_kind(t) >= 0 && t != DType::IQ2_XXS) GTEST_SKIP() << "same path as IQ2_XXS";
  const int64_t cols = dtype_info(t).block_size == 256 ? 512 : (is_float(t) ? 200 : 256);
  const Case c{t, 300, cols, 20};
  ThreadPool p1(1), p2(2), p3(3);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    const auto y0 = check_case(c, nullptr, std::string(isa_name(isa)) + " no pool");
    EXPECT_EQ(check_case(c, &p1, "pool1"), y0);
    EXPECT_EQ(check_case(c, &p2, "pool2"), y0);
    EXPECT_EQ(check_case(c, &p3, "pool3"), y0);
  }
}

// The weight prefetch hint (NTA on AMD, T1 elsewhere; kern::g_prefetch_weights_nta) only moves cache
// lines: both hints give the oracle-checked result and the same bits, on every ISA, for one token
// (GEMV) and a 20-token batch (tiles), whichever hint this CPU picked by default.
TEST_P(MatmulType, PrefetchHintsGiveTheSameBits) {
  const DType t = GetParam();
  const int64_t cols = dtype_info(t).block_size == 256 ? 512 : (is_float(t) ? 200 : 256);
  const bool saved = kern::g_prefetch_weights_nta;
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (int64_t n : {1, 20}) {
      const Case c{t, 300, cols, n};
      const std::string label = std::string(isa_name(isa)) + " n " + std::to_string(n);
      kern::g_prefetch_weights_nta = false;
      const auto t1 = check_case(c, nullptr, label + " t1");
      kern::g_prefetch_weights_nta = true;
      const auto nta = check_case(c, nullptr, label + " nta");
      EXPECT_EQ(t1, nta) << label;
    }
  }
  kern::g_prefetch_weights_nta = saved;
}

// Quantized types: a token's output does not depend on the batch it is computed in (activations are
// quantized per token and the per-token arithmetic is the same for every tile size).
class QuantizedType : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedType, ResultsDoNotDependOnBatch) {
  const DType t = GetParam();
  ASSERT_TRUE(is_int8_path(t));
  const int64_t cols = is_kquant(t) ? 512 : 256, rows = 40, n = 11;
  const OwnedMatrix w = make_matrix(t, rows, cols, 5);
  const std::vector<float> x = make_x(n, cols, cols, 6);
  const PreparedMatrix pm(w.m);
  ThreadPool p2(2);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    std::vector<float> batch(static_cast<size_t>(n * rows)), single(batch.size());
    matmul(pm, x.data(), cols, batch.data(), rows, n, &p2);
    for (int64_t i = 0; i < n; ++i) matmul(pm, x.data() + i * cols, cols, single.data() + i * rows, rows, 1, &p2);
    EXPECT_EQ(batch, single) << isa_name(isa);
  }
}

// The AMX level's tile kernels (kernels/qgemm_legacy_amx.cpp) give the AVX-512 kernels' results bit for
// bit: every tile size (one token stays AVX-512; 2..8 tokens one A tile; 16 two), rows that end inside
// a 16-row group, with and without a pool.
TEST(Matmul, AmxTilesGiveTheAvx512Bits) {
  if (detected_isa() < Isa::Amx) GTEST_SKIP() << "no AMX-INT8 on this CPU (or not enabled by the OS)";
  {
    IsaGuard guard(Isa::Amx);
    ASSERT_EQ(active_isa(), Isa::Amx) << "Linux refused this process the AMX tile state (arch_prctl)";
  }
  ThreadPool p2(2);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const int64_t rows = 45, cols = 320;
    const OwnedMatrix w = make_matrix(t, rows, cols, 17);
    const PreparedMatrix pm(w.m);
    for (int64_t n : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 33}) {
      const std::vector<float> x = make_x(n, cols, cols, static_cast<uint32_t>(n));
      std::vector<float> vnni(static_cast<size_t>(n * rows)), amx(vnni.size());
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &p2}) {
        {
          IsaGuard guard(Isa::Avx512);
          matmul(pm, x.data(), cols, vnni.data(), rows, n, pool);
        }
        {
          IsaGuard guard(Isa::Amx);
          matmul(pm, x.data(), cols, amx.data(), rows, n, pool);
        }
        ASSERT_EQ(amx, vnni) << dtype_name(t) << " n=" << n << (pool ? " pool" : "");
      }
    }
  }
}

// The same kernels' code on the software model of the tiles (kernels/amx_tiles.h), called directly on
// packed weights and quantized activation tiles, so every AVX-512 CPU checks the AMX level's tile
// shapes, strides and operand order: each tile size 1..8, two tiles per pass (qgemm2), a group range
// that starts past 0, rows that end inside a group -- bit for bit the AVX-512 kernels' results.
TEST(Matmul, AmxModelGivesTheAvx512Bits) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "x86-64 only";
#else
  if (detected_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const kern::KernelTable& vnni = kern::kernel_table(Isa::Avx512);
  kern::KernelTable amx = vnni;
  kern::add_qgemm_legacy_amx_soft(amx);
  struct Kind {
    DType type;
    int kind;
  };
  for (const Kind k : {Kind{DType::Q8_0, kern::kPackQ8_0}, Kind{DType::Q4_0, kern::kPackQ4_0},
                       Kind{DType::Q4_1, kern::kPackQ4_1}, Kind{DType::Q5_0, kern::kPackQ5_0},
                       Kind{DType::Q5_1, kern::kPackQ5_1}}) {
    const int64_t rows = 45, cols = 320, nb = cols / 32, groups = (rows + 15) / 16, tile = kern::kTile;
    const OwnedMatrix w = make_matrix(k.type, rows, cols, 23);
    const PreparedMatrix pm(w.m);
    ASSERT_EQ(pm.packed_kind, k.kind) << dtype_name(k.type);
    ASSERT_NE(amx.qgemm[k.kind], vnni.qgemm[k.kind]) << dtype_name(k.type);
    const auto* wb = static_cast<const uint8_t*>(pm.packed.get());
    const std::vector<float> x = make_x(2 * tile, cols, cols, 5);
    const size_t tile_bytes = static_cast<size_t>(nb * tile * kern::kQ8RecordBytes);
    std::vector<uint8_t> act_buf(2 * tile_bytes + 64);  // 64-byte aligned, as matmul's
    uint8_t* const act = act_buf.data() + (64 - reinterpret_cast<uintptr_t>(act_buf.data()) % 64) % 64;
    for (int T = 1; T <= tile; ++T) {
      vnni.quant_act_q8(x.data(), cols, T, cols, kern::q8_zero_point(k.kind), act);
      for (const int64_t g0 : {int64_t{0}, int64_t{1}}) {
        std::vector<float> a(static_cast<size_t>(T * rows), -1.0f), b(a);
        vnni.qgemm[k.kind](wb, nb, g0, groups, act, T, a.data(), rows, rows);
        amx.qgemm[k.kind](wb, nb, g0, groups, act, T, b.data(), rows, rows);
        ASSERT_EQ(b, a) << dtype_name(k.type) << " T=" << T << " g0=" << g0;
      }
    }
    vnni.quant_act_q8(x.data(), cols, tile, cols, kern::q8_zero_point(k.kind), act);
    vnni.quant_act_q8(x.data() + tile * cols, cols, tile, cols, kern::q8_zero_point(k.kind), act + tile_bytes);
    std::vector<float> a(static_cast<size_t>(2 * tile * rows), -1.0f), b(a);
    for (int h = 0; h < 2; ++h)
      vnni.qgemm[k.kind](wb, nb, 0, groups, act + h * tile_bytes, tile, a.data() + h * tile * rows, rows, rows);
    ASSERT_NE(amx.qgemm2[k.kind], nullptr);
    amx.qgemm2[k.kind](wb, nb, 0, groups, act, act + tile_bytes, b.data(), rows, rows);
    ASSERT_EQ(b, a) << dtype_name(k.type) << " two tiles";
  }
#endif
}

// (Float types are not batch-invariant: GEMV multiplies in f32, GEMM on AVX-512 in bf16.)
INSTANTIATE_TEST_SUITE_P(Int8Types, QuantizedType,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4,
                                           DType::Q2_K, DType::Q3_K, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                                           DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S, DType::IQ1_M),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulType,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                                           DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4,
                                           DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                                           DType::IQ1_S, DType::IQ1_M, DType::Q8_1),  // Q8_1: the generic dequantize-and-dot path
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Matmul, ReferenceOnHandComputedValues) {
  // W = [[1, 2, 3], [-1, 0.5, 4]] (F32), x0 = [1, 1, 1], x1 = [2, -2, 0.25]
  const float w[6] = {1, 2, 3, -1, 0.5f, 4};
  Matrix m{DType::F32, 2, 3, w, 12, "w"};
  const float x[6] = {1, 1, 1, 2, -2, 0.25f};
  float ref[4], y[4];
  matmul_reference(m, x, 3, ref, 2, 2);
  EXPECT_EQ(ref[0], 6.0f);
  EXPECT_EQ(ref[1], 3.5f);
  EXPECT_EQ(ref[2], -1.25f);
  EXPECT_EQ(ref[3], -2.0f);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    matmul(PreparedMatrix(m), x, 3, y, 2, 2, nullptr);
    EXPECT_EQ(std::vector<float>(y, y + 4), std::vector<float>(ref, ref + 4)) << isa_name(isa);
  }
}

TEST(Matmul, Q8_0HandComputedBlock) {
  // One Q8_0 row: d = 0.5, q = 0..31 -> w[c] = c / 2. x = 1 everywhere (quantizes exactly: amax 1,
  // q = 127, d = 1/127). Sum = 0.5 * (0 + ... + 31) = 248.
  std::vector<uint8_t> blk(34);
  const uint16_t d = fp32_to_fp16(0.5f);
  std::memcpy(blk.data(), &d, 2);
  for (int i = 0; i < 32; ++i) blk[2 + i] = static_cast<uint8_t>(i);
  Matrix m{DType::Q8_0, 1, 32, blk.data(), 34, "w"};
  std::vector<float> x(32, 1.0f);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    float y = 0;
    matmul(PreparedMatrix(m), x.data(), 32, &y, 1, 1, nullptr);
    EXPECT_NEAR(y, 248.0f, 248.0f * 1e-6f) << isa_name(isa);
  }
}

TEST(Matmul, PackingIsIndependentOfTheIsaUsedLater) {
  const OwnedMatrix w = make_matrix(DType::Q4_0, 20, 64, 9);
  const std::vector<float> x = make_x(3, 64, 64, 10);
  const PreparedMatrix pm(w.m);  // packed with the full ISA
  std::vector<float> ref(60), y(60);
  matmul_reference(w.m, quantized_x(x, 3, 64, 64, 32).data(), 64, ref.data(), 20, 3);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    matmul(pm, x.data(), 64, y.data(), 20, 3, nullptr);
    for (int i = 0; i < 60; ++i) EXPECT_NEAR(y[i], ref[i], 1e-3f * (1 + std::fabs(ref[i]))) << isa_name(isa);
  }
}

// matmul_many converts the activations once per format and runs every product in one region; each
// output must equal its own matmul call exactly (same kernels, same per-token arithmetic).
TEST(Matmul, ManyEqualsSeparateCalls) {
  const int64_t cols = 512;
  const DType types[] = {DType::Q4_0, DType::Q8_0, DType::F16, DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q2_K};
  const int64_t rows[] = {48, 17, 40, 33, 16, 1, 20};
  std::vector<OwnedMatrix> ws;
  std::vector<std::unique_ptr<PreparedMatrix>> pms;
  for (int i = 0; i < 7; ++i) {
    ws.push_back(make_matrix(types[i], rows[i], cols, 100 + i));
    pms.push_back(std::make_unique<PreparedMatrix>(ws.back().m));
  }
  ThreadPool p2(2);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (int64_t n : {1, 5, 40}) {
      const std::vector<float> x = make_x(n, cols + 1, cols, static_cast<uint32_t>(n));
      std::vector<std::vector<float>> many(7), single(7);
      std::vector<MatmulOutput> outs;
      for (int i = 0; i < 7; ++i) {
        many[i].assign(static_cast<size_t>(n * rows[i]), 0.0f);
        single[i].assign(many[i].size(), 1.0f);
        outs.push_back({pms[i].get(), many[i].data(), rows[i]});
        matmul(*pms[i], x.data(), cols + 1, single[i].data(), rows[i], n, &p2);
      }
      matmul_many(outs.data(), 7, x.data(), cols + 1, n, &p2);
      for (int i = 0; i < 7; ++i) EXPECT_EQ(many[i], single[i]) << isa_name(isa) << " n=" << n << " output " << i;
    }
  }
}

// matmul_swiglu folds SwiGLU into the product's activation conversion; the output and the
// overwritten gate rows must be bitwise those of silu_mul followed by matmul, on every path
// (int8 tiles, the bf16 copy, float and generic kernels), ISA, token count and pool.
TEST(Matmul, SwigluEqualsSiluMulThenMatmul) {
  const int64_t cols = 512, ld = cols + 3;
  const DType types[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16, DType::F32, DType::Q3_K, DType::Q8_1};
  ThreadPool p2(2);
  for (DType t : types) {
    const int64_t rows = 37;
    const OwnedMatrix w = make_matrix(t, rows, cols, 77);
    const PreparedMatrix pm(w.m);
    for (Isa isa : available_isas()) {
      IsaGuard guard(isa);
      for (int64_t n : {1, 7, 8, 17, 40}) {
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &p2}) {
          const std::vector<float> g = make_x(n, ld, cols, static_cast<uint32_t>(n));
          const std::vector<float> u = make_x(n, cols, cols, static_cast<uint32_t>(n + 100));
          std::vector<float> g_ref = g, g_fused = g;
          std::vector<float> y_ref(static_cast<size_t>(n * rows), 0.0f), y_fused(y_ref.size(), 1.0f);
          for (int64_t r = 0; r < n; ++r) silu_mul(g_ref.data() + r * ld, u.data() + r * cols, cols);
          matmul(pm, g_ref.data(), ld, y_ref.data(), rows, n, pool);
          matmul_swiglu(pm, g_fused.data(), ld, u.data(), cols, y_fused.data(), rows, n, pool);
          const std::string label = std::string(dtype_name(t)) + " " + isa_name(isa) + " n=" + std::to_string(n);
          ASSERT_EQ(0, std::memcmp(y_fused.data(), y_ref.data(), y_ref.size() * 4)) << label;
          for (int64_t r = 0; r < n; ++r)  // the gate rows hold silu(g) * u; the padding is untouched
            ASSERT_EQ(0, std::memcmp(g_fused.data() + r * ld, g_ref.data() + r * ld, cols * 4)) << label;
          for (int64_t r = 0; r + 1 < n; ++r)
            for (int64_t c = cols; c < ld; ++c) ASSERT_TRUE(std::isnan(g_fused[r * ld + c])) << label;
        }
      }
    }
  }
}

// Weights the kernels read in their file layout get a copy on huge pages from 64 KiB up (a file
// mapping has 4 KiB pages). The kernels must read the copy, and it must hold the same bytes.
TEST(Matmul, LargeFloatWeightsAreReadFromAnAlignedCopy) {
  OwnedMatrix big = make_matrix(DType::F16, 1200, 896, 7);  // 2.05 MiB, read in place by the float kernels
  const size_t bytes = big.m.row_bytes * 1200;
  const PreparedMatrix pm(big.m);
  ASSERT_NE(pm.source().data, big.m.data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pm.source().data) % 64, 0u);
  EXPECT_EQ(std::memcmp(pm.source().data, big.m.data, bytes), 0);
  const std::vector<float> x = make_x(3, 896, 896, 5);
  ThreadPool p2(2);
  std::vector<float> before1(1200), before3(3 * 1200), after1(1200), after3(3 * 1200);
  matmul(pm, x.data(), 896, before1.data(), 1200, 1, &p2);
  matmul(pm, x.data(), 896, before3.data(), 1200, 3, &p2);
  std::fill(big.bytes.begin(), big.bytes.end(), uint8_t{0x7c});  // the original no longer matters
  matmul(pm, x.data(), 896, after1.data(), 1200, 1, &p2);
  matmul(pm, x.data(), 896, after3.data(), 1200, 3, &p2);
  EXPECT_EQ(before1, after1);
  EXPECT_EQ(before3, after3);
  // Below, and for weights repacked at load, the file layout is used in place.
  const OwnedMatrix small = make_matrix(DType::F16, 16, 896, 8);  // 28 KiB
  EXPECT_EQ(PreparedMatrix(small.m).source().data, small.m.data);
  const OwnedMatrix q = make_matrix(DType::Q8_0, 4096, 896, 9);
  EXPECT_EQ(PreparedMatrix(q.m).source().data, q.m.data);
}

TEST(Matmul, AlignedBufferIsZeroedAndHugePageAligned) {
  const size_t mib = size_t{1} << 20;
  for (size_t bytes : {size_t{100}, mib, 3 * mib / 2, 2 * mib, 9 * mib / 2, 5 * mib}) {
    auto buf = kern::aligned_buffer(bytes);
    const auto* p = static_cast<const uint8_t*>(buf.get());
    const size_t align = bytes >= 3 * mib / 2 ? 2 * mib : 64;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << bytes;
    EXPECT_TRUE(std::all_of(p, p + bytes, [](uint8_t b) { return b == 0; })) << bytes;
  }
}

// Weight buffers share huge-page slabs: every piece zeroed, 64-byte aligned and its own, across
// more pieces than one slab holds.
TEST(Matmul, WeightBuffersAreDistinctZeroedPieces) {
  std::vector<std::shared_ptr<void>> pieces;
  std::vector<size_t> sizes;
  for (int i = 0; i < 48; ++i) {
    sizes.push_back((size_t{1} << 20) + 4096 * static_cast<size_t>(i) + 8 * static_cast<size_t>(i % 3));
    pieces.push_back(kern::weight_buffer(sizes.back()));
    auto* p = static_cast<uint8_t*>(pieces.back().get());
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    ASSERT_TRUE(std::all_of(p, p + sizes.back(), [](uint8_t b) { return b == 0; })) << i;
    std::memset(p, i + 1, sizes.back());
  }
  for (int i = 0; i < 48; ++i) {
    const auto* p = static_cast<const uint8_t*>(pieces[static_cast<size_t>(i)].get());
    EXPECT_TRUE(std::all_of(p, p + sizes[static_cast<size_t>(i)], [&](uint8_t b) { return b == i + 1; })) << i;
  }
}

TEST(Matmul, GetRowDequantizes) {
  const OwnedMatrix w = make_matrix(DType::Q8_0, 4, 64, 3);
  std::vector<float> a(64), b(64);
  get_row(w.m, 2, a.data());
  dequantize_row(DType::Q8_0, w.m.row(2), b.data(), 64);
  EXPECT_EQ(a, b);
}

}  // namespace
