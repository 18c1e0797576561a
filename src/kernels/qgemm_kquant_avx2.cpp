// AVX2 kernels for the K-quants: not written yet, the dispatcher falls back to the scalar kernels.
#include "kernels/kernel_abi.h"

namespace tmill::kern {

QGemmFn qgemm_kquant_avx2(int) { return nullptr; }

}  // namespace tmill::kern
