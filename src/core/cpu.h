// Run-time CPU feature detection and the ISA level kernels dispatch on.
#pragma once

#include <string_view>

namespace tmill {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  // AMX tiles with int8 products (Sapphire Rapids and later Xeons); amx_os: XCR0 enables the tile state.
  // (Linux's per-process permission, arch_prctl, is asked for when the AMX level becomes active; where
  // it is refused, active_isa() stays at Avx512.)
  bool amx_tile = false, amx_int8 = false, amx_os = false;
  bool amd = false;  // vendor "AuthenticAMD" (kernels/dispatch.cpp picks the weight-prefetch hint by it)
};

// Amx: Avx512 plus AMX-INT8 tile products (kernels/*_amx.cpp); opt-in for now (active_isa below).
enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Amx = 3 };

// x86-64 features from cpuid; all false on other processors.
const CpuFeatures& cpu_features();
// Best level this CPU (and OS) supports: Avx512 needs F/BW/VL/DQ/VNNI/BF16, Avx2 needs AVX2/FMA/F16C,
// Amx needs Avx512 and AMX-TILE/AMX-INT8 enabled in XCR0.
// Scalar on processors other than x86-64.
Isa detected_isa();
// The level kernels use: min(detected, override). The override comes from set_isa_limit() or the
// environment variable TOKENMILL_ISA=scalar|avx2|avx512|amx (tests force each path this way); without
// either it is avx512, so the AMX level runs only where asked for. Computed
// once and on each set_isa_limit(), so a call is one atomic load; kernels/dispatch.h maps it to the
// kernel table.
Isa active_isa();
void set_isa_limit(Isa limit);
const char* isa_name(Isa isa);
bool parse_isa(std::string_view s, Isa* out);

// One iteration of a spin-wait loop (`pause` on x86: yields the core's pipeline to its sibling).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace tmill
