// kernels/qgemm_legacy_amx.cpp compiled against kernels/amx_tiles.h's software model of the AMX tiles,
// registered by add_qgemm_legacy_amx_soft: the AMX level's own code, runnable on any AVX-512 CPU
// (matmul_test's AmxModelGivesTheAvx512Bits). The file has AVX-512 flags (its name) and no static
// initializers: nothing in it runs unless the test has checked for AVX-512 first.
#define TM_AMX_SOFT 1
#define add_qgemm_legacy_amx add_qgemm_legacy_amx_soft
#include "kernels/qgemm_legacy_amx.cpp"  // NOLINT(bugprone-suspicious-include): the kernel itself, once more
