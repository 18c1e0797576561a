// Element-wise and row-wise operations of the transformer block (everything except matmul and
// attention). Generic loops plus AVX2 / AVX-512 versions (ops_avx2.cpp, ops_avx512.cpp) picked at run
// time; rmsnorm_rows, add_inplace, axpy and rope_heads_cs give the same bits on every ISA (same operation
// order, no FMA contraction), silu_mul and exp_shift_scale use a vector exp (~2 ulp).
#pragma once

#include <cstdint>
#include <vector>

namespace tmill {

// One token of a gated delta net's head (model/gated_delta_net.h): S (d x d, row j for value dimension
// j) = S decay; then per row j, delta_j = (v_j - S_j . k) beta, S_j += delta_j k, o_j = (S_j . q) scale.
// The vector levels sum the dot products in another order (a few ulp).
void delta_rule_step(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     float* o, int64_t d);
// One row of a Mamba-2 scan (model/mamba2.h): s_i = s_i dA + B_i xdt for i < n; returns sum s_i C_i
// (summed in another order on the vector levels).
float ssm_scan_row(float* s, const float* B, const float* C, float dA, float xdt, int64_t n);
// Mamba-1's channel (model/mamba1.h): s_i = s_i exp(dt A_i) + B_i xdt, returning sum_i s_i C_i (ggml's
// order; the vector levels' exp within ~2 ulp of expf).
float ssm_scan_row_decay(float* s, const float* A, const float* B, const float* C, float dt, float xdt, int64_t n);

// out[r] = w * x[r] / sqrt(mean(x[r]^2) + eps) for n_rows rows of n (rows may be strided).
void rmsnorm_rows(const float* x, int64_t ldx, const float* w, float* out, int64_t ldo, int64_t n_rows, int64_t n,
                  float eps);
// LayerNorm of n_rows rows of n (ggml_norm, then * w, + b when not null): the mean, and the variance of
// the differences, summed in double; out may be x. Scalar, not per-ISA: the encoders' norms and the
// LayerNorm decoders' (cohere) are a small share of a step.
void layernorm_rows(const float* x, int64_t ldx, const float* w, const float* b, float* out, int64_t ldo, int64_t n_rows,
                    int64_t n, float eps);
// gate[i] = silu(gate[i]) * up[i] (vectorized exp on AVX2/AVX-512)
void silu_mul(float* gate, const float* up, int64_t n);
// gate[i] = gelu(gate[i]) * up[i], GELU's tanh approximation (GeGLU: gemma); the reference's bits
void gelu_mul(float* gate, const float* up, int64_t n);
// x[i] = cap * tanh(x[i] / cap) (soft-capping: gemma's logits)
void softcap_inplace(float* x, int64_t n, float cap);
// out[i] = exp((x[i] - shift) * scale) (vectorized; out may alias x)
void exp_shift_scale(const float* x, float shift, float scale, float* out, int64_t n);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// y[i] = x[i] as an IEEE half (round to nearest even), bitwise core/fp16.h's fp32_to_fp16 on every ISA
void f32_to_f16(const float* x, uint16_t* y, int64_t n);
// y[i] += a * x[i], multiplied then added (no FMA): the same bits on every ISA (LoRA deltas)
void axpy(float* y, const float* x, float a, int64_t n);
// Index of the first largest element, as std::max_element on finite values (greedy sampling over a
// 150k-entry vocabulary: std::max_element's loop carries a load->compare->select chain, ~7 cycles
// per element; this is a vector max then a vector search for its first position). n >= 1.
int64_t argmax(const float* x, int64_t n);

// RoPE for one token: rotates the first n_rot dims of each of n_heads vectors (head_dim apart).
// inv_freq: n_rot/2 frequencies (theta^(-2i/n_rot) / freq_factor_i); neox selects half-split pairs.
void rope_heads(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, float pos, const float* inv_freq,
                bool neox);
// Same rotation with precomputed cos/sin of pos * inv_freq[i] (n_rot/2 each): one table per token
// serves every layer.
void rope_heads_cs(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos_t,
                   const float* sin_t, bool neox);
void rope_cos_sin(float pos, const float* inv_freq, int64_t half, float* cos_t, float* sin_t);
// The frequencies rope_heads expects, computed exactly as the reference does.
std::vector<float> rope_inv_freq(int64_t n_rot, float theta, const float* freq_factors);

}  // namespace tmill
