// The kernel dispatch table: every kernel the dispatchers (matmul.cpp, attention.cpp, ops.cpp) call,
// as function pointers, one table per ISA level. kernels/dispatch.cpp builds the tables once and is
// the one place backends register: it calls the add_* functions below, lowest level first, and each
// kernel file overwrites the entries it has a faster version of, so a level keeps the lower levels'
// kernels for whatever it lacks. A call site reads kernels() (kernels/dispatch.h) once per call and
// calls through the pointers: no ISA tests in the hot paths.
//
// Plain data (the ISA files include it to register; see kernel_abi.h for why).
//
// Adding a backend (say aarch64 NEON): write kernels/*_neon.cpp with an add_*_neon(KernelTable&),
// give it its compile flags in cmake/tm_module.cmake (only on that processor), and call it from
// kernels/dispatch.cpp for the level it needs (a new Isa in core/cpu.h and its detection).
#pragma once

#include <cstdint>

#include "kernels/attention_abi.h"
#include "kernels/kernel_abi.h"

namespace tmill::kern {

// ---- row operations (kernels/ops.h says what they compute and which must be bitwise the same)
using RmsnormRowFn = void (*)(const float* x, const float* w, float* o, int64_t n, float eps);
using SiluMulFn = void (*)(float* gate, const float* up, int64_t n);
using GeluMulFn = void (*)(float* gate, const float* up, int64_t n);
using ExpShiftScaleFn = void (*)(const float* x, float shift, float scale, float* out, int64_t n);
using ArgmaxFn = int64_t (*)(const float* x, int64_t n);
using AddInplaceFn = void (*)(float* y, const float* x, int64_t n);
using AxpyFn = void (*)(float* y, const float* x, float a, int64_t n);
// NeoX RoPE (pairs i and i + half) of n_heads vectors head_dim apart, with cos/sin tables of `half`.
using RopeFn = void (*)(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                        const float* sin_t);
using ToF16Fn = void (*)(const float* x, uint16_t* y, int64_t n);
// One token of a gated delta net's head (ops.h delta_rule_step) and of a Mamba-2 scan row (ssm_scan_row).
using DeltaRuleFn = void (*)(float* S, const float* q, const float* k, const float* v, float decay, float beta,
                             float scale, float* o, int64_t d);
using SsmScanRowFn = float (*)(float* s, const float* B, const float* C, float dA, float xdt, int64_t n);
// One Mamba-1 channel (ops.h ssm_scan_row_decay): a decay exp(dt A_i) per state element.
using SsmScanDecayFn = float (*)(float* s, const float* A, const float* B, const float* C, float dt, float xdt,
                                 int64_t n);

// One set per level: every kernel file of row operations provides all of them.
struct RowOps {
  RmsnormRowFn rmsnorm_row;
  SiluMulFn silu_mul;
  ExpShiftScaleFn exp_shift_scale;
  ArgmaxFn argmax;
  AddInplaceFn add_inplace;
  RopeFn rope_neox;  // the NeoX rotation only; the GPT-J order is rope_pairs_scalar's on every level
  AxpyFn axpy;
  GeluMulFn gelu_mul;  // GeGLU (gemma)
  ToF16Fn to_f16;      // f32 -> IEEE half, round to nearest even: bitwise core/fp16.h's fp32_to_fp16
  DeltaRuleFn delta_rule;    // recurrent layers (model/gated_delta_net.h, model/mamba2.h)
  SsmScanRowFn ssm_scan_row;
  SsmScanDecayFn ssm_scan_row_decay;
};

inline constexpr int kPackKinds = kPackQ3_K + 1;

// Value-initialize (KernelTable t{}): every entry starts null.
struct KernelTable {
  // Activation quantizers (every level).
  QuantActQ8Fn quant_act_q8;
  QuantActQ8KFn quant_act_q8k;
  // Quantized GEMM by PackKind: every x16 kind (kPackQ8_0 .. kPackQ6_K, kPackIQ4_NL .. kPackQ3_K) on
  // every level; null for kPackNone and kPackBf16Copy (no int8 kernel reads those).
  QGemmFn qgemm[kPackKinds];
  // Optional: two tiles per weight pass (null: the dispatcher calls qgemm once per tile).
  QGemm2Fn qgemm2[kPackKinds];
  // Lattice i-quant GEMM by IqKind (quant/iq_decode.h) on row-major weights (every level).
  IqGemmFn iq_gemm[kIqGemmKinds];
  // Float-type GEMM by FloatType (every level).
  FGemmFn fgemm[kFloatTypes];
  // Optional, all three or none: the bf16 GEMM path for two or more tokens. Where it exists, F16
  // weights also get the x16 bf16 copy at load (kernels/pack.h).
  GemmBf16Fn gemm_bf16;
  GemmBf16x16Fn gemm_bf16x16;
  ToBf16Fn to_bf16;
  // Paged attention by KvType, for the shapes attention_covers() accepts; attention_scalar (any
  // shape, one KV head) otherwise: runs of several KV heads a kernel does not take go head by head
  // (run_attention in attention.cpp, the one place that splits them).
  AttnCoversFn attention_covers;
  AttnFn attention[kKvTypes];
  // Row operations (every level).
  RowOps ops;
};

// Registration, one function per kernel file (dispatch.cpp calls them).
void add_qgemm_scalar(KernelTable& t);  // quant_act_q8/_q8k and qgemm for every x16 kind
void add_iq_gemm_scalar(KernelTable& t);  // iq_gemm for every IqKind
void add_fgemm_scalar(KernelTable& t);
void add_attention_scalar(KernelTable& t);
void add_ops_scalar(KernelTable& t);
// x86-64 only (cmake/tm_module.cmake compiles these files only there).
void add_act_quant_avx2(KernelTable& t);
void add_qgemm_legacy_avx2(KernelTable& t);
void add_qgemm_kquant_avx2(KernelTable& t);
void add_qgemm_iq4_avx2(KernelTable& t);
void add_qgemm_k23_avx2(KernelTable& t);  // Q2_K, Q3_K
void add_iq_gemm_avx2(KernelTable& t);
void add_iq_gemm_avx512(KernelTable& t);
// PDEP is fast here (set when the AVX-512 table is built: every AVX-512 CPU has a fast one, AMD before
// Zen 3 a microcoded one); the i-quant decoders (IQ1_S, IQ2_S, IQ3_S) use it to unpack grid indices. Same results either way.
extern bool g_iq_fast_pdep;
void add_fgemm_avx2(KernelTable& t);
void add_attention_avx2(KernelTable& t);
void add_ops_avx2(KernelTable& t);
void add_act_quant_avx512(KernelTable& t);  // and to_bf16
void add_qgemm_legacy_avx512(KernelTable& t);  // and qgemm2
void add_qgemm_legacy_amx(KernelTable& t);  // Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 qgemm and qgemm2 on AMX tiles (2+ tokens)
void add_qgemm_kquant_avx512(KernelTable& t);
void add_qgemm_iq4_avx512(KernelTable& t);
void add_qgemm_k23_avx512(KernelTable& t);  // Q2_K, Q3_K
void add_fgemm_avx512(KernelTable& t);  // and gemm_bf16, gemm_bf16x16
void add_attention_avx512(KernelTable& t);
void add_ops_avx512(KernelTable& t);

// gate[i] = gelu_tanh(gate[i]) * up[i], the reference's formula (ops_scalar.cpp).
void gelu_mul_scalar(float* gate, const float* up, int64_t n);

// The generic rotation both orders use (ops_scalar.cpp): the GPT-J order's only kernel, and the
// scalar table's NeoX one.
void rope_pairs_scalar(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                       const float* sin_t, bool neox);

}  // namespace tmill::kern
