// The ISA levels the kernel tests run every path on, and a guard that puts the level back.
#pragma once

#include <vector>

#include "core/cpu.h"

namespace tmill::test {

// Every level this CPU (and build) has, Scalar first; only Scalar off x86-64.
inline std::vector<Isa> available_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx})
    if (isa <= detected_isa()) v.push_back(isa);
  return v;
}

// Limits kernels to `isa` for its scope (or leaves the level alone); the detected level afterwards.
struct IsaGuard {
  IsaGuard() = default;
  explicit IsaGuard(Isa isa) { set_isa_limit(isa); }
  ~IsaGuard() { set_isa_limit(detected_isa()); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
};

}  // namespace tmill::test
