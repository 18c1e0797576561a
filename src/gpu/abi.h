// Which build of the CUDA backend's code a translation unit sees. The kernels (gpu/*.cu) and their
// host calls (gpu/kernels.h, gpu/device.h, cuda_ops()) are compiled twice: for CUDA (nvcc with
// -DTM_CUDA=ON; else no_cuda.cpp's errors) in namespace tmill::gpu::cuda, and as plain C++ for the
// emulator (gpu/emu/emu.h, -DTM_CUDA_EMU; `--device cuda-emu`) in tmill::gpu::emu. Both are inline
// namespaces, so code says gpu::gemm either way and one binary holds both builds.
#pragma once

#if defined(TM_CUDA_EMU)
#define TM_GPU_ABI emu
#else
#define TM_GPU_ABI cuda
#endif
