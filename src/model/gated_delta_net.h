// The gated delta net (ModelConfig::is_gdn layers: qwen35, qwen35moe), the batched forward's helper,
// as llama.cpp's qwen35 graph and ggml_gated_delta_net compute it. From a token's projections
// [qkv | z | beta | alpha] (attn_qkv, attn_gate, ssm_beta, ssm_alpha):
//   q, k, v = silu(conv(qkv)) (the causal convolution of model/mamba2.h, no bias), q and k L2-normed
//          per key head (x / sqrt(sum x^2 + eps)); value head h reads key head h % key heads (qwen3next:
//          h / (value heads / key heads), ModelConfig::gdn_key_head);
//   per value head: decay = exp(softplus(alpha + dt_bias) * A), b = sigmoid(beta); the state S
//          (head x head) = S decay, then S += (v - S k) b k^T, and o = S q / sqrt(head);
//   y = rmsnorm(o) per head * ssm_norm * silu(z), then ssm_out.
// The convolution's last inputs and S carry over from step to step in the sequence's state slot
// (KvStorage::seq_state). Tested against ReferenceForward and both against llama.cpp
// (tests/llamacpp/families.mjs).
#pragma once

#include <cstdint>

#include "model/batch.h"
#include "model/config.h"
#include "model/kv_storage.h"
#include "model/mamba2.h"
#include "model/model.h"

namespace tmill {

class ThreadPool;

// The width of a row of the layer's projections: qkv (ssm_conv_dim), z (d_inner), beta and alpha (a
// value per value head).
inline int64_t gdn_in_dim(const ModelConfig& c) { return c.ssm_conv_dim() + c.ssm_d_inner + 2 * c.ssm_n_head; }

// in: n rows of gdn_in_dim; y: n rows of d_inner, the layer's output before ssm_out; layer: its state
// index (ModelConfig::cache_slot); step: as Mamba-2's (model/mamba2.h). Updates each sequence's state in `kv`.
void gated_delta_net_mix(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                         int64_t layer, const SsmStep& step, const float* in, float* y, int64_t n, ThreadPool* pool);

}  // namespace tmill
