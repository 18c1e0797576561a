// The one place kernels register: builds a KernelTable per ISA level from the kernel files' add_*
// functions, lowest level first (each level overwrites what it has a faster kernel for).
#include "kernels/dispatch.h"

#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace tmill::kern {

// Written once, while the tables are built (below): every kernel is reached through them.
bool g_prefetch_weights_nta = false;

namespace {

// The weight stream's prefetch hint (kernels/isa_avx2.h, prefetch_weights): NTA on AMD, T1 elsewhere;
// TOKENMILL_PREFETCH=nta|t1 overrides it (for measuring one against the other on a new machine).
bool choose_prefetch_nta() {
  if (const char* e = std::getenv("TOKENMILL_PREFETCH")) {
    if (std::strcmp(e, "nta") == 0) return true;
    if (std::strcmp(e, "t1") == 0) return false;
    log_warn("TOKENMILL_PREFETCH={}: expected nta or t1; using the default for this CPU", e);
  }
  return cpu_features().amd;
}

constexpr int kLevels = static_cast<int>(Isa::Amx) + 1;

KernelTable build(Isa isa) {
  KernelTable t{};
  add_qgemm_scalar(t);
  add_iq_gemm_scalar(t);
  add_fgemm_scalar(t);
  add_attention_scalar(t);
  add_ops_scalar(t);
#if defined(__x86_64__)  // the *_avx2.cpp / *_avx512.cpp / *_amx.cpp files are compiled on x86-64 only
  if (isa >= Isa::Avx2) {
    add_act_quant_avx2(t);
    add_qgemm_legacy_avx2(t);
    add_qgemm_kquant_avx2(t);
    add_qgemm_iq4_avx2(t);
    add_qgemm_k23_avx2(t);
    add_iq_gemm_avx2(t);
    add_fgemm_avx2(t);
    add_attention_avx2(t);
    add_ops_avx2(t);
  }
  if (isa >= Isa::Avx512) {
    add_act_quant_avx512(t);
    add_qgemm_legacy_avx512(t);
    add_qgemm_kquant_avx512(t);
    add_qgemm_iq4_avx512(t);
    add_qgemm_k23_avx512(t);
    add_iq_gemm_avx512(t);
    add_fgemm_avx512(t);
    add_attention_avx512(t);
    add_ops_avx512(t);
  }
  if (isa >= Isa::Amx) add_qgemm_legacy_amx(t);
#else
  (void)isa;
#endif
  // An aarch64 NEON or a CUDA backend registers here, for the level that selects it.
  return t;
}

struct Tables {
  KernelTable level[kLevels];
  Tables() {
    g_prefetch_weights_nta = choose_prefetch_nta();  // before any kernel is reachable
    // Only the levels this CPU has are built; those above it are copies of the highest (active_isa()
    // never exceeds detected_isa()). An ISA file is compiled with its ISA's flags, its add_* function
    // too, and the compiler uses those instructions there: GCC 12 stores add_attention_avx512's
    // pointers with a zmm move, which killed every process with SIGILL on an AVX2-only CPU (AMD EPYC
    // Zen 3, 2026-12-07) at its first kernel call.
    const int det = static_cast<int>(detected_isa());
    for (int i = 0; i < kLevels; ++i) level[i] = i <= det ? build(static_cast<Isa>(i)) : level[det];
  }
};

const Tables& tables() {
  static const Tables t;  // built once, thread-safe; never changes afterwards
  return t;
}

}  // namespace

const KernelTable& kernel_table(Isa isa) {
  const int i = static_cast<int>(isa);
  TM_ASSERT(i >= 0 && i < kLevels, "kernel_table: bad ISA level");
  return tables().level[i];
}

const KernelTable& kernels() { return tables().level[static_cast<int>(active_isa())]; }

}  // namespace tmill::kern
