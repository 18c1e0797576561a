// Which kernels run: the table for the active ISA level (kernels/kernel_table.h).
#pragma once

#include "core/cpu.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {

// The table of a level. Levels this build or CPU has no kernels for hold the best lower level's
// entries (on aarch64 every level is the portable table), so kernel_table(Isa::Scalar) works
// everywhere; calling a level above detected_isa() is the caller's mistake (tests check first).
const KernelTable& kernel_table(Isa isa);

// The table for active_isa(): one atomic load and an index. Read it once per call (matmul,
// attention, a row operation) and call through it; set_isa_limit() / TOKENMILL_ISA switch tables
// for the calls that start afterwards.
const KernelTable& kernels();

}  // namespace tmill::kern
