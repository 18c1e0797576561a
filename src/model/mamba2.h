// Mamba-2's mixer (ModelConfig::is_ssm layers: granitehybrid), the batched forward's helper, as
// llama.cpp's build_mamba2_layer computes it. From a token's ssm_in output [z | xBC | dt]:
//   xBC' = silu(conv(xBC) + conv bias), the depthwise convolution over the token's and the
//          ssm_d_conv - 1 previous tokens' xBC (zero before position 0), split into x (heads x
//          head_dim), B and C (groups x d_state; head h reads group h / (heads / groups));
//   per head: dt' = softplus(dt + dt_bias), the state S (head_dim x d_state) = S exp(dt' A) +
//          dt' x B^T, y = S C + D x;
//   y = rmsnorm_per_group(y * silu(z)) * norm weights, then ssm_out.
// The convolution's last inputs and S carry over from step to step in the sequence's state slot
// (KvStorage::seq_state, SeqSlice::state_slot). Tested against ReferenceForward (model/reference.cpp),
// and both against llama.cpp (tests/llamacpp/families.mjs).
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/config.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace tmill {

class ThreadPool;

// What a recurrent layer's step takes besides its weights, from the batched forward: the convolution's
// kernel tap-major (ssm_d_conv rows of ssm_conv_dim, prepared once at load: ssm_conv_kernel_t), a row of
// ssm_conv_dim ones (silu through silu_mul), and the step's scratch of n rows of ssm_conv_dim.
struct SsmStep {
  const float* kernel_t = nullptr;
  const float* ones = nullptr;
  float* conv = nullptr;
};
// L's convolution kernel (ssm_conv_dim x ssm_d_conv, channel-major) tap-major.
std::vector<float> ssm_conv_kernel_t(const ModelConfig& c, const LayerWeights& L);

// The causal depthwise convolution both recurrent layer kinds run first: step.conv (n rows of
// ssm_conv_dim) = silu(conv + bias) over each row's input (in, rows ld_in apart) and the ssm_d_conv - 1
// inputs before it in its sequence, which come from the sequence's state slot (zero at position 0,
// where the whole slot is reset) and which the slot then keeps for the next step.
void ssm_causal_conv(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                     int64_t layer, const SsmStep& step, const float* in, int64_t ld_in, ThreadPool* pool);

// zx: n rows of ssm_in's output (ssm_in_dim each, read only);
// y: n rows of d_inner, the mixer's output before ssm_out; layer: the mixer's state index
// (ModelConfig::cache_slot). Updates each sequence's state in `kv`.
void mamba2_mix(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                int64_t layer, const SsmStep& step, const float* zx, float* y, int64_t n, ThreadPool* pool);

// ggml's softplus: x above 20 as it is, else log(1 + e^x).
inline float ssm_softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

}  // namespace tmill
