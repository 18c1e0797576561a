#include "core/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdlib>

namespace tmill {
namespace {

// Linux hands out the AMX tile state (8 KiB per thread) only to a process that asks for it
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, kernel 5.16+); without it the first tile
// instruction faults. The grant also enlarges every thread's signal frames, so it is asked for only
// when the AMX level is chosen (compute_active), once.
bool amx_permission() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool granted = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

#if defined(__x86_64__)
unsigned long long xgetbv0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

// The instruction-set features (every field but the vendor).
CpuFeatures detect_isa_features() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  if (!osxsave || !avx) return CpuFeatures{};
  const unsigned long long xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_os) return CpuFeatures{};
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  if (zmm_os) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    f.amx_tile = d & (1u << 24);
    f.amx_int8 = d & (1u << 25);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = a & (1u << 5);
  }
  f.amx_os = f.amx_tile && f.amx_int8 && (xcr0 & 0x60000) == 0x60000;
  return f;
}

CpuFeatures detect() {
  CpuFeatures f = detect_isa_features();
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d))
    f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "Auth" "enti" "cAMD"
  return f;
}
#else
// No x86 features elsewhere: detected_isa() is Scalar, and the kernel table has the portable
// entries (plus whatever a backend for this architecture registers in kernels/dispatch.cpp).
CpuFeatures detect() { return CpuFeatures{}; }
#endif

std::atomic<int> g_limit{-1};
// active_isa(), computed once and again by every set_isa_limit(): -1 until first asked.
std::atomic<int> g_active{-1};

int env_limit() {
  static const int v = [] {
    const char* e = std::getenv("TOKENMILL_ISA");
    Isa isa;
    if (e && parse_isa(e, &isa)) return static_cast<int>(isa);
    // The AMX level is opt-in (TOKENMILL_ISA=amx) until an AMX machine has measured it faster than
    // AVX-512 VNNI (it was written, and tested on a software model of the tiles, without one).
    return static_cast<int>(Isa::Avx512);
  }();
  return v;
}

int compute_active() {
  int lim = g_limit.load(std::memory_order_relaxed);
  if (lim < 0) lim = env_limit();
  const int det = static_cast<int>(detected_isa());
  int a = det < lim ? det : lim;
  if (a == static_cast<int>(Isa::Amx) && !amx_permission()) a = static_cast<int>(Isa::Avx512);
  return a;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

Isa detected_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16 && f.avx2 && f.fma &&
      f.f16c)
    return f.amx_os ? Isa::Amx : Isa::Avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
  return Isa::Scalar;
}

Isa active_isa() {
  int a = g_active.load(std::memory_order_relaxed);
  if (a < 0) {
    // First call: publish the level unless a set_isa_limit() got there first (then use its value).
    int expected = -1;
    const int computed = compute_active();
    a = g_active.compare_exchange_strong(expected, computed, std::memory_order_relaxed) ? computed : expected;
  }
  return static_cast<Isa>(a);
}

void set_isa_limit(Isa limit) {
  g_limit.store(static_cast<int>(limit));
  g_active.store(compute_active());
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Amx: return "amx";
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "scalar";
  }
}

bool parse_isa(std::string_view s, Isa* out) {
  if (s == "scalar") *out = Isa::Scalar;
  else if (s == "avx2") *out = Isa::Avx2;
  else if (s == "avx512") *out = Isa::Avx512;
  else if (s == "amx") *out = Isa::Amx;
  else return false;
  return true;
}

}  // namespace tmill
