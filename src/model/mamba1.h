// Mamba-1's mixer (ArchSpec::mamba1: the mamba family), the batched forward's helper, as llama.cpp's
// build_mamba_layer and ggml_ssm_scan compute it. From a token's ssm_in output [x | z]:
//   x' = silu(conv(x) + conv bias), the depthwise convolution of model/mamba2.h over d_inner channels;
//   [dt | B | C] = x_proj x' (dt of dt_rank, B and C of d_state; falcon-mamba RMS-normalizes each without
//          weights, jamba with), dt = dt_proj dt + dt_bias;
//   per channel i: dt' = softplus(dt_i), its state row h (d_state) = h * exp(dt' A_i) + dt' x'_i B,
//          y_i = h . C + D_i x'_i (kernels/ops.h ssm_scan_row_decay);
//   y = y * silu(z), then ssm_out.
// The convolution's last inputs and the states carry over in the sequence's state slot, as Mamba-2's.
// This file holds the scan and the gate; the forward runs the projections around it.
#pragma once

#include <cstdint>

#include "model/batch.h"
#include "model/config.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace tmill {

class ThreadPool;

// xc: n rows of d_inner (silu(conv(x)), from ssm_causal_conv); xdb: n rows of ld_xdb, B at column
// dt_rank and C after it; dt: n rows of d_inner (dt_proj's output, before its bias); zx: ssm_in's output
// rows (2 d_inner: z in the second half); y: n rows of d_inner. Updates each sequence's states in `kv`
// (their slot's rows after the convolution's inputs; a step at position 0 starts from zero, which
// ssm_causal_conv's reset of the slot provides).
void mamba1_scan(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                 int64_t layer, const float* xc, const float* xdb, int64_t ld_xdb, const float* dt, const float* zx,
                 float* y, ThreadPool* pool);

}  // namespace tmill
