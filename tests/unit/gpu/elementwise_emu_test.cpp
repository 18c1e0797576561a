// elementwise_test.cpp once more, on the emulator's build of the CUDA kernels (as kernels_emu_test.cpp).
#define TM_CUDA_EMU 1
#define GpuKernels GpuKernelsOnEmu
#include "elementwise_test.cpp"
