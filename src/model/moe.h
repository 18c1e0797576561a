// The batched mixture-of-experts FFN (qwen3moe, qwen2moe, olmoe, Mixtral-style llama, gpt-oss,
// granitemoe, glm4moe): every token of the step is routed (router product, softmax or sigmoid gating,
// top-k), the batch's (token, expert) pairs
// are grouped by expert so each active expert's weights are read once per step with the batch's
// matmul kernels, experts nobody chose are skipped, and each token's expert outputs are summed in
// ascending expert order (the same bits whatever else is in the batch). A shared expert runs on every
// token, scaled by its sigmoid gate (qwen2moe) or not (glm4moe). nemotron_h_moe's experts and shared
// expert have no gate: down(relu(up x)^2) (ArchSpec::moe_ungated). Tested against ReferenceForward::moe_ffn.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"
#include "model/model.h"

namespace tmill {

class ThreadPool;
class ActivationObserver;  // model/forward.h

// One layer's MoE weights prepared for the kernels (PreparedMatrix per expert row view).
struct PreparedMoe {
  PreparedMatrix router;
  std::vector<PreparedMatrix> gate, up, down;
  PreparedMatrix gate_sh, up_sh, down_sh;  // shared expert (qwen2moe, glm4moe), else empty
  bool shared = false;
  const std::vector<float>* gate_inp_shexp = nullptr;  // its gate (qwen2moe), else null
  const float* selection_bias = nullptr;  // glm4moe's exp_probs_b (n_expert), else null
  // gpt-oss (ArchSpec::moe_biases): the router's bias (n_expert) and the experts' biases, expert-major
  // (n_expert x n_ff_exp for gate and up, n_expert x n_embd for down); null otherwise
  const float* router_b = nullptr;
  const float* gate_b = nullptr;
  const float* up_b = nullptr;
  const float* down_b = nullptr;
  // gemma4: each expert's output scale (ffn_down_exps.scale, n_expert), else null
  const float* down_scale = nullptr;
  // (weight, prepared slot) pairs for Forward's parallel preparation
  void collect(const LayerWeights& L, std::vector<std::pair<const Matrix*, PreparedMatrix*>>& jobs);
  uint64_t bytes() const;
};

// The k (expert, weight) pairs of one token from its router logits: softmax over all experts, the k
// most probable (ties: lower index), renormalized to sum 1 when `norm`; written in ascending expert
// order. softmax_topk (gpt-oss): the k largest logits, weights a softmax over those k. Same result
// as ref::moe_route, sorted by expert. scratch: n_expert floats.
void moe_route_token(const float* logits, int64_t n_expert, int64_t k, bool norm, int32_t* experts, float* weights,
                     float* scratch, bool softmax_topk = false);
// The general form (ref::moe_route's): sigmoid gating, a selection bias (may be null), the weights'
// scale. scratch: 2 x n_expert floats.
void moe_route_token(const float* logits, int64_t n_expert, int64_t k, const ModelConfig::MoeGate& gate,
                     const float* selection_bias, int32_t* experts, float* weights, float* scratch);
// gpt-oss's expert activation over m rows of F: g = swiglu_oai(g + bg, u + bu) (ref::swiglu_oai, the
// exp vectorized); bg/bu are one expert's F biases. tmp: F floats of scratch.
void swiglu_oai_rows(float* g, const float* u, const float* bg, const float* bu, int64_t m, int64_t F, float* tmp);

class MoeFfn {
 public:
  // y (n rows, stride ld) = MoE FFN of x (n rows of n_embd, stride ld); x and y may be the same.
  // observer (may be null) sees each active expert's inputs, on the calling thread. route_x (gemma4:
  // the router reads its own norm of the layer's input; same stride): the router's input, else x.
  // The experts' activation is the family's (GeGLU for gemma4, SwiGLU for the others).
  void run(const ModelConfig& c, const PreparedMoe& w, const float* x, float* y, int64_t ld, int64_t n,
           ThreadPool* pool, ActivationObserver* observer = nullptr, const float* route_x = nullptr);
  // Experts the last run computed (tests: decode touches only the chosen ones).
  const std::vector<int32_t>& active_experts() const { return active_; }

 private:
  std::vector<float> logits_, probs_, tmp_, weight_, xg_, hg_, ug_, yg_, hs_, us_, ys_, gsh_;
  std::vector<int32_t> expert_, count_, offset_, slot_, active_;
};

}  // namespace tmill
