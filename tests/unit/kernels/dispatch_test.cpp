// The kernel dispatch table (kernels/dispatch.h): every entry a dispatcher can ask for is filled on
// every level this CPU has, the portable table works on any CPU, and kernels() follows the ISA limit.
// (That each entry computes the right thing is the other kernel tests' job: they run every level
// against the scalar oracle.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "kernels/dispatch.h"
#include "isa_levels.h"
#include "kernels/pack.h"

using namespace tmill;
using namespace tmill::kern;
using tmill::test::available_isas;
using tmill::test::IsaGuard;

namespace {

bool has_bf16(const KernelTable& t) { return t.gemm_bf16 != nullptr; }

}  // namespace

TEST(KernelTable, EveryEntryADispatcherCanAskForIsFilledOnEveryAvailableLevel) {
  for (Isa isa : available_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const KernelTable& t = kernel_table(isa);
    EXPECT_NE(t.quant_act_q8, nullptr);
    EXPECT_NE(t.quant_act_q8k, nullptr);
    for (int kind = kPackQ8_0; kind <= kPackQ6_K; ++kind) EXPECT_NE(t.qgemm[kind], nullptr) << "kind " << kind;
    for (int kind : {kPackIQ4_NL, kPackIQ4_XS, kPackMXFP4, kPackQ2_K, kPackQ3_K})
      EXPECT_NE(t.qgemm[kind], nullptr) << "kind " << kind;
    for (int type = 0; type < kFloatTypes; ++type) EXPECT_NE(t.fgemm[type], nullptr) << "float type " << type;
    // The bf16 path is optional, but all of it or none.
    EXPECT_EQ(t.gemm_bf16x16 != nullptr, has_bf16(t));
    EXPECT_EQ(t.to_bf16 != nullptr, has_bf16(t));
    ASSERT_NE(t.attention_covers, nullptr);
    for (int kv = 0; kv < kKvTypes; ++kv) EXPECT_NE(t.attention[kv], nullptr) << "kv type " << kv;
    EXPECT_NE(t.ops.rmsnorm_row, nullptr);
    EXPECT_NE(t.ops.silu_mul, nullptr);
    EXPECT_NE(t.ops.exp_shift_scale, nullptr);
    EXPECT_NE(t.ops.argmax, nullptr);
    EXPECT_NE(t.ops.add_inplace, nullptr);
    EXPECT_NE(t.ops.rope_neox, nullptr);
    EXPECT_NE(t.ops.axpy, nullptr);
    EXPECT_NE(t.ops.to_f16, nullptr);
    // Whatever packed layout a weight of any type gets at load (with or without the bf16 copy) has
    // a GEMM on this level; the bf16 copy is only made where the CPU's table can read it.
    for (uint32_t id = 0; id < 64; ++id) {
      if (!dtype_info(id)) continue;
      for (bool bf16_copy : {false, true}) {
        const int kind = pack_kind_for(static_cast<DType>(id), bf16_copy);
        if (kind == kPackNone) continue;
        if (kind == kPackBf16Copy) continue;  // read by gemm_bf16x16 (checked above) or as F16 weights
        EXPECT_NE(t.qgemm[kind], nullptr) << dtype_info(id)->name;
      }
    }
  }
}

TEST(KernelTable, X86LevelsHaveTheirKernels) {
  if (detected_isa() < Isa::Avx2) GTEST_SKIP() << "no AVX2 on this CPU (or not x86-64): only the portable table";
  EXPECT_NE(kernel_table(Isa::Avx2).qgemm[kPackQ4_0], kernel_table(Isa::Scalar).qgemm[kPackQ4_0]);
  for (int kind : {kPackIQ4_NL, kPackIQ4_XS, kPackMXFP4, kPackQ2_K, kPackQ3_K})
    EXPECT_NE(kernel_table(Isa::Avx2).qgemm[kind], kernel_table(Isa::Scalar).qgemm[kind]) << "kind " << kind;
  EXPECT_NE(kernel_table(Isa::Avx2).attention[kKvF16], &attention_scalar);
  EXPECT_FALSE(has_bf16(kernel_table(Isa::Avx2)));
  if (detected_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const KernelTable& t = kernel_table(Isa::Avx512);
  EXPECT_TRUE(has_bf16(t));
  for (int kind = kPackQ8_0; kind <= kPackQ5_1; ++kind) EXPECT_NE(t.qgemm2[kind], nullptr) << "kind " << kind;
  EXPECT_NE(t.qgemm2[kPackIQ4_NL], nullptr);
  EXPECT_NE(t.qgemm2[kPackMXFP4], nullptr);
  for (int kind : {kPackIQ4_NL, kPackIQ4_XS, kPackMXFP4, kPackQ2_K, kPackQ3_K})
    EXPECT_NE(t.qgemm[kind], kernel_table(Isa::Avx2).qgemm[kind]) << "kind " << kind;
  if (detected_isa() >= Isa::Amx) {  // AMX tiles for the 32-element block types, the rest as AVX-512
    const KernelTable& a = kernel_table(Isa::Amx);
    for (int kind = kPackQ8_0; kind <= kPackQ5_1; ++kind) {
      EXPECT_NE(a.qgemm[kind], t.qgemm[kind]) << "kind " << kind;
      EXPECT_NE(a.qgemm2[kind], t.qgemm2[kind]) << "kind " << kind;
    }
    EXPECT_EQ(a.qgemm[kPackQ4_K], t.qgemm[kPackQ4_K]);
  }
  // Shapes the AVX-512 attention leaves to the scalar kernel are not ones AVX2 would have taken.
  for (int64_t bs : {8, 16, 32})
    for (int64_t hd = 1; hd <= 264; ++hd)
      for (int64_t group = 1; group <= 17; ++group) {
        AttnArgs a;
        a.block_size = bs;
        a.head_dim = hd;
        a.group = group;
        if (kernel_table(Isa::Avx2).attention_covers(a)) {
          EXPECT_TRUE(t.attention_covers(a)) << "bs " << bs << " hd " << hd << " group " << group;
        }
      }
}

// The levels above this CPU's are not built (their registration code, compiled with their ISA's flags,
// may itself use those instructions: SIGILL on an AVX2-only CPU before 0ede1ef); they are copies of
// the highest level it has. (On an AVX-512 machine without AMX: the AMX level; on AVX2: both above.)
TEST(KernelTable, LevelsAboveTheCpuAreCopiesOfItsHighest) {
  const Isa det = detected_isa();
  const KernelTable& top = kernel_table(det);
  int checked = 0;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Amx}) {
    if (isa <= det) continue;
    const KernelTable& t = kernel_table(isa);
    EXPECT_EQ(t.attention_covers, top.attention_covers) << isa_name(isa);
    for (int kv = 0; kv < kKvTypes; ++kv) EXPECT_EQ(t.attention[kv], top.attention[kv]) << isa_name(isa);
    for (int kind = kPackQ8_0; kind <= kPackQ6_K; ++kind) EXPECT_EQ(t.qgemm[kind], top.qgemm[kind]) << isa_name(isa);
    EXPECT_EQ(t.ops.silu_mul, top.ops.silu_mul) << isa_name(isa);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "this CPU has every level";
}

TEST(KernelTable, ThePortableTableWorksOnAnyCpu) {
  const KernelTable& t = kernel_table(Isa::Scalar);
  EXPECT_EQ(t.quant_act_q8, &quant_act_q8_scalar);
  EXPECT_EQ(t.quant_act_q8k, &quant_act_q8k_scalar);
  for (int kv = 0; kv < kKvTypes; ++kv) EXPECT_EQ(t.attention[kv], &attention_scalar);
  EXPECT_TRUE(t.attention_covers(AttnArgs{}));
  EXPECT_FALSE(has_bf16(t));
  for (int kind = 0; kind < kPackKinds; ++kind) EXPECT_EQ(t.qgemm2[kind], nullptr);
  // A 2 x 3 F32 product, an argmax and a residual add through it.
  const float w[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, 0, -1};
  float y[2] = {0, 0};
  t.fgemm[kFloatF32](w, 3 * sizeof(float), 3, x, 3, y, 2, 0, 2, 1);
  EXPECT_EQ(y[0], -2.0f);
  EXPECT_EQ(y[1], -2.0f);
  const float v[5] = {1, 7, 3, 7, -2};
  EXPECT_EQ(t.ops.argmax(v, 5), 1);
  float acc[3] = {1, 1, 1};
  t.ops.add_inplace(acc, x, 3);
  EXPECT_EQ(acc[0], 2.0f);
  EXPECT_EQ(acc[2], 0.0f);
}

TEST(KernelTable, KernelsFollowTheIsaLimit) {
  IsaGuard guard;
  for (Isa isa : available_isas()) {
    set_isa_limit(isa);
    EXPECT_EQ(active_isa(), isa);
    EXPECT_EQ(&kernels(), &kernel_table(isa)) << isa_name(isa);
  }
  set_isa_limit(Isa::Scalar);
  EXPECT_EQ(kernels().quant_act_q8, &quant_act_q8_scalar);
}

// The level names TOKENMILL_ISA takes, and the AMX level asked for where the CPU lacks it: the limit
// only caps, so the best level this CPU has runs (active_isa never exceeds detected_isa).
TEST(KernelTable, IsaNamesAndALimitAboveTheCpu) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
    Isa parsed = Isa::Scalar;
    ASSERT_TRUE(parse_isa(isa_name(isa), &parsed)) << isa_name(isa);
    EXPECT_EQ(parsed, isa);
  }
  Isa unused;
  EXPECT_FALSE(parse_isa("amx512", &unused));
  IsaGuard guard;
  set_isa_limit(Isa::Amx);
  EXPECT_EQ(active_isa(), detected_isa());
  EXPECT_EQ(&kernels(), &kernel_table(detected_isa()));
}

// The CPU vendor (the one CpuFeatures field that is not an instruction set) agrees with the kernel's
// /proc/cpuinfo, and the kernel tables set the weight prefetch hint from it: NTA on AMD, T1 elsewhere,
// unless TOKENMILL_PREFETCH says otherwise.
TEST(KernelTable, PrefetchHintFollowsTheCpuVendor) {
  std::ifstream info("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(info, line))
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  if (vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo (not x86 Linux)";
  EXPECT_EQ(cpu_features().amd, vendor == "AuthenticAMD") << vendor;
  (void)kernels();  // builds the tables, which fix the hint
  const char* env = std::getenv("TOKENMILL_PREFETCH");
  const std::string e = env ? env : "";
  const bool want = e == "nta" ? true : e == "t1" ? false : cpu_features().amd;
  EXPECT_EQ(g_prefetch_weights_nta, want);
}
