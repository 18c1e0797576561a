// cuda_bf16.h for the emulated build of the CUDA backend: gpu/emu/emu.h has it all.
#pragma once
#include "gpu/emu/emu.h"
