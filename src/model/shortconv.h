// lfm2's gated short convolution (ModelConfig::is_conv layers), the batched forward's helper: from a
// token's in_proj output [b | c | x] (3 x n_embd), out = c * conv(b * x), the depthwise convolution
// mixing, channel by channel, b * x of the token and of the shortconv_l - 1 tokens before it in its
// sequence (zero before position 0), as llama.cpp's ggml_ssm_conv over the concatenated state; then
// out_proj. Those previous inputs come from the same step's rows when they are in it, else from the
// paged cache's convolution state (KvLayout::conv_ring), which this step then updates. Tested against
// ReferenceForward (model/reference.cpp), and that against a float64 oracle.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/config.h"
#include "model/kv_storage.h"

namespace tmill {

class ThreadPool;

// bcx: n rows of [b | c | x] (in_proj's output; b is overwritten with b * x); out: n rows of n_embd,
// c * conv(b * x); pos / seq_of: each row's position and SeqSlice; kernel: the layer's (n_embd x
// shortconv_l); state: the layer's KvStorage::conv_state. Every read of the state happens before the
// step's writes, and a position's input is written only when no later row of the step takes its slot.
void shortconv_mix(const ModelConfig& c, const std::vector<float>& kernel, const ForwardBatch& batch,
                   const int32_t* pos, const int32_t* seq_of, const KvLayout& lay, float* state, float* bcx,
                   float* out, int64_t n, ThreadPool* pool);

}  // namespace tmill
