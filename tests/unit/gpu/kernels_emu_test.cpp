// kernels_test.cpp once more, on the emulator's build of the CUDA kernels (gpu/abi.h: with TM_CUDA_EMU
// the calls resolve to namespace tmill::gpu::emu, gpu/emu/emu.h runs them on the CPU): every kernel
// against its CPU oracle on every machine, not only where a GPU is lent.
#define TM_CUDA_EMU 1
#define GpuKernels GpuKernelsOnEmu
#include "kernels_test.cpp"
