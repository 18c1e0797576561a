// Plain-data interface between the generic dispatcher (matmul.cpp, pack.cpp) and the ISA-specific
// kernels (*_scalar.cpp, *_avx2.cpp, *_avx512.cpp), which reach it through the kernel table
// (kernels/kernel_table.h). No STL and no inline functions with external linkage here: the ISA files
// are compiled with AVX flags, and an inline function compiled there could be the copy the linker
// keeps for the whole program (the rule is in cmake/tm_module.cmake; the ISA headers
// kernels/isa_avx2.h and kernels/isa_avx512.h say how they keep it).
//
// ---------------------------------------------------------------------------------------------
// Packed quantized weights ("x16" layouts, made once by pack.cpp, identical for every ISA)
//
// Rows are interleaved in groups of kRows = 16 (the last group is padded with zero rows). Group g
// covers rows 16g..16g+15 and is stored as nb consecutive "group-blocks"; group-block b holds
// block b (32 or 256 columns) of all 16 rows. A "chunk" is 4 consecutive bytes of one row, so one
// 64-byte vector holds the same chunk of all 16 rows: [16 rows][4 bytes]. That is the operand of
// one vpdpbusd against the 4 activation bytes broadcast to every lane.
//
//   Q8_0 (544 B = 16 x 34): d[16] f16 | q[8 c][16 r][4] u8, q = int8 weight + 128 (elements 4c..4c+3)
//   Q4_0 (288 B = 16 x 18): d[16] f16 | n[4 c][16 r][4] u8, low nibble = element 4c+i, high nibble
//                            = element 16+4c+i (the GGUF byte order, regrouped); value d*(q-8)
//   Q4_1 (320 B = 16 x 20): d[16] f16 | m[16] f16 | n as Q4_0;                 value d*q + m
//   Q5_0 (352 B = 16 x 22): d[16] f16 | h[16 r][4] | n as Q4_0;  value d*(q-16)
//   Q5_1 (384 B = 16 x 24): d[16] f16 | m[16] f16 | h[16 r][4] | n as Q4_0;  value d*q + m
//        fifth bit of element 4c+i (c = 0..7) is bit c of byte i of the row's 4 h bytes.
//
// K-quants (256-column super-blocks, sub-blocks j):
//   Q4_K (2368 B = 16 x 148): d[16] f16 | dmin[16] f16 | sc[8 j][16 r] u8 | mp[4 i][16 r][2] u8
//        (mins m_{2i}, m_{2i+1}) | then per 32-column sub-block j: n[4 c][16 r][4] (Q4_0 nibble
//        order, 256 B);  value d*sc_j*q - dmin*m_j
//   Q5_K (2880 B = 16 x 180): as Q4_K, but each sub-block is n (256 B) followed by its fifth bits
//        h[16 r][4] (Q5_0 order, 64 B): 320 B per sub-block
//   Q6_K (3360 B = 16 x 210): d[16] f16 | sc[16 j][16 r] i8 | then per 32-column slice s (384 B):
//        n[4 c][16 r][4] (low 4 bits, Q4_0 nibble order) | h[2 k][16 r][4] (high 2 bits: element
//        32s + 4c + i (c < 4) at bits 2c..2c+1 of byte i of h[0]; element 32s + 16 + 4c + i at
//        bits 2c.. of h[1]);  value d*sc_j*(q-32), j = element / 16
//   Q2_K (1344 B = 16 x 84): d[16] f16 | dmin[16] f16 | sm[8 i][16 r][2] u8 (the GGUF scale bytes
//        scale | min << 4 of sub-blocks 2i, 2i+1) | then per 32-column slice s (128 B):
//        l[2 k][16 r][4] 2-bit levels of sub-block 2s+k ("crumb" order: element 16k + 4c + i of
//        the slice at bits 2c..2c+1 of byte i);  value d*scale_j*q - dmin*min_j, j = element / 16
//   Q3_K (1824 B = 16 x 114): d[16] f16 | sc[16 j][16 r] i8 (the 6-bit scale - 32) | then per
//        32-column slice s (192 B): l[2 k][16 r][4] (low 2 bits, Q2_K's crumb order) | h[16 r][4]
//        (third bit of element 4c + i of the slice at bit c of byte i, c = 0..7: Q5_0's order);
//        value d*sc_j*(q-4), q = low | third << 2 in 0..7
//   Weights are read front to back within a group-block (one sequential stream per thread).
//
// Non-linear 4-bit types (levels kIq4nlValues[q] of quant/blocks.h, q the stored 4-bit index):
//   IQ4_NL (288 B = 16 x 18): d[16] f16 | n[4 c][16 r][4] indices in Q4_0's nibble order;
//        value d*values[q]. Q8 records with zero point 128: kernels that multiply unsigned bytes look
//        the index up as values[q] + 128.
//   IQ4_XS (2208 B = 16 x 138, 256 columns): d[16] f16 | sc[8 j][16 r] i8 (the 6-bit scale - 32) |
//        then per 32-column sub-block j: n[4 c][16 r][4] indices (Q4_0 nibble order, 256 B);
//        value d*sc_j*values[q]. Q8K records (the zero point 128 via bsum32).
//
//   MXFP4 (272 B = 16 x 17, the file's bytes): e[16] E8M0 bytes | n[4 c][16 r][4] E2M1 codes in Q4_0's
//        nibble order; value half(e)*kMxfp4Values[q] (the doubled E2M1 values, -12..12; half(e) =
//        2^(e-128), quant/blocks.h mxfp4_half_scale, made in registers: an f32 scale per row would
//        stream 18 % more bytes than the file). Q8 records with zero point 128, as IQ4_NL.
//
//   bf16 copy of F16 weights (kPackBf16Copy): per group of 16 rows, ncp = ceil(cols / 2) column
//        pairs of 64 bytes, [16 r][2] bf16 (columns 2p, 2p+1 of each row): the operand of one
//        vdpbf16ps against one token's 2 activations broadcast to all lanes.
//
// ---------------------------------------------------------------------------------------------
// Quantized activations, made per call. Tokens are processed in tiles of T <= kTile tokens; a tile
// is a sequence of records, one per weight block, holding that block for all T tokens:
//   Q8 record (32-column blocks, T*40 bytes): qs[T][32] i8 | d[T] f32 | bias[T] i32
//        x ~ d * qs (per-block max / 127, rounded to nearest); bias = -offset * sum(qs), where
//        offset is the weight type's zero point (128 for Q8_0, 8 for Q4_0, 16 for Q5_0); for the
//        types with a min (Q4_1, Q5_1) bias = +sum(qs) (offset -1).
//   Q8K record (256-column super-blocks, T*340 bytes): qs[T][256] i8 | d[T] f32 |
//        bsum32[T][8] i16 (sums of each 32 qs) | bias16[T][16] i32 (-32 * sum of each 16 qs)
//        x ~ d * qs with d = max|x| / 127 per 256 columns.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmill::kern {

// The weight stream's prefetch hint: true = NTA, false = T1 (isa_avx2.h, prefetch_weights). Set once by
// kernels/dispatch.cpp while the kernel tables are built (NTA on AMD; TOKENMILL_PREFETCH=nta|t1);
// it changes which cache level the lines go to, never a result.
extern bool g_prefetch_weights_nta;

inline constexpr int kRows = 16;  // rows per interleaved group
inline constexpr int kTile = 8;   // tokens per activation tile

enum PackKind : int {
  kPackNone = 0,
  kPackQ8_0 = 1,
  kPackQ4_0 = 2,
  kPackQ4_1 = 3,
  kPackQ5_0 = 4,
  kPackQ5_1 = 5,
  kPackQ4_K = 6,
  kPackQ5_K = 7,
  kPackQ6_K = 8,
  kPackBf16Copy = 9,  // F16 weights: a bf16 copy in the x16 layout below, for GEMM
  kPackIQ4_NL = 10,
  kPackIQ4_XS = 11,
  kPackMXFP4 = 12,
  kPackQ2_K = 13,
  kPackQ3_K = 14,
};

// Bytes of one group-block per packed kind (0 for non-interleaved kinds).
inline constexpr int kGroupBlockBytes[] = {0, 544, 288, 320, 352, 384, 2368, 2880, 3360, 0, 288, 2208, 272, 1344, 1824};
// Byte offsets inside a 32-column group-block, by PackKind (Q8_0 .. Q5_1; 0 where absent): the f16
// mins (Q4_1, Q5_1), the fifth bits (Q5_0, Q5_1), and the levels (bytes for Q8_0, nibbles otherwise).
struct LegacyLayout {
  int m, h, q;
};
inline constexpr LegacyLayout kLegacyLayout[] = {
    {0, 0, 0}, {0, 0, 32}, {0, 0, 32}, {32, 0, 64}, {0, 32, 96}, {32, 64, 128}};
inline constexpr int kQ8RecordBytes = 40;    // per token, 32-column block

// The `offset` of a packed kind's Q8 records (above): the weights' zero point, -1 for the types with a
// min (Q4_1, Q5_1). IQ4_NL and MXFP4 levels are looked up as values + 128.
inline constexpr int q8_zero_point(int kind) {
  switch (kind) {
    case kPackQ8_0: case kPackIQ4_NL: case kPackMXFP4: return 128;
    case kPackQ4_0: return 8;
    case kPackQ5_0: return 16;
    default: return -1;
  }
}
inline constexpr int kQ8KRecordBytes = 340;  // per token, 256-column super-block

// ---- activation quantizers: T tokens (rows of x, stride ldx floats) -> nb records at `rec`
// cols is a multiple of 32 (Q8) or 256 (Q8K).
using QuantActQ8Fn = void (*)(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* rec);
using QuantActQ8KFn = void (*)(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* rec);
// The portable versions: every table's fallback, and the oracle the SIMD ones are tested against.
void quant_act_q8_scalar(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* rec);
void quant_act_q8k_scalar(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* rec);

// ---- quantized GEMM over packed weights
// Groups [g0, g1) of the packed weight `w` (nb blocks per row) times one activation tile of T
// tokens (`act`, nb records). Writes y[t * ldy + r] for t < T and real rows r < rows.
using QGemmFn = void (*)(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T,
                         float* y, int64_t ldy, int64_t rows);
// Two full tiles (2 x kTile tokens) in one pass over the weights: tile 0's records at act0, tile 1's
// at act1; writes rows of y for tokens 0..2*kTile-1. Each token's result is bitwise the QGemmFn one.
using QGemm2Fn = void (*)(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act0,
                          const uint8_t* act1, float* y, int64_t ldy, int64_t rows);

// ---- lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), indexed by iq_decode.h's
// IqKind: weights stay row-major in the file layout (no x16 packing); activations are Q8K records.
// Rows [r0, r1) of `w` (row_bytes apart, nb super-blocks each) times n tokens in tiles of kTile
// (tile i's nb records at act + i * tile_bytes; the last tile may be partial): y[t * ldy + r]. Per
// super-block the kernels decode the integer form of quant/iq_decode.h and add (d * dx) *
// float(sum_j sc_j * integer dot of 16-group j) to the token's float sum, which is multiplied by the
// type's power-of-two factor at the end: every ISA gives the same bits.
inline constexpr int kIqGemmKinds = 7;
using IqGemmFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act,
                          size_t tile_bytes, int64_t n, float* y, int64_t ldy);

// ---- float-type GEMM on row-major weights (F32, F16, BF16): y[t][r] = sum_c W[r][c] x[t][c]
// Rows [r0, r1), tokens [0, T) (T any), x f32 with row stride ldx.
using FGemmFn = void (*)(const void* w, size_t row_bytes, int64_t cols, const float* x, int64_t ldx, float* y,
                         int64_t ldy, int64_t r0, int64_t r1, int64_t T);
// Index of a float type in the table (and the kernels' template parameter); the KV element types
// (attention_abi.h) use the same numbers for these three.
enum FloatType : int { kFloatF32 = 0, kFloatF16 = 1, kFloatBF16 = 2 };
inline constexpr int kFloatTypes = 3;

// ---- bf16 path (AVX-512 BF16): weights bf16 row-major (row_bytes stride; columns >= cols are read
// only up to cols), activations already converted to bf16 rows of ldxb elements, zero-padded to a
// multiple of 32.
using GemmBf16Fn = void (*)(const uint16_t* w, size_t row_bytes, int64_t cols, const uint16_t* xb, int64_t ldxb,
                            float* y, int64_t ldy, int64_t r0, int64_t r1, int64_t T);
// Groups [g0, g1) of a bf16 x16 copy (ncp column pairs per group) times T tokens of bf16 activations
// (rows of ldxb elements, zero-padded past cols): y[t * ldy + r] for real rows r < rows.
using GemmBf16x16Fn = void (*)(const uint16_t* w, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y,
                               int64_t ldy, int64_t rows, int64_t g0, int64_t g1, int64_t T);
// Converts T rows of x (cols floats, stride ldx) to bf16 rows of ldxb (a multiple of 32) elements,
// zero-filled beyond cols.
using ToBf16Fn = void (*)(const float* x, int64_t ldx, int64_t T, int64_t cols, uint16_t* xb, int64_t ldxb);

// ---- compile-time kinds for registration: a kernel file instantiates its template for each kind
// it has and stores the result in the table:
//   for_each_kind<kPackQ8_0, kPackQ4_0>([&](auto k) { t.qgemm[k.value] = entry<decltype(k)::value>; });
// `static` (internal linkage), so an ISA file's copy never stands in for another's.
template <int K>
struct KindTag {
  static constexpr int value = K;
};
template <int... Ks, class F>
static inline void for_each_kind(F&& f) {
  (f(KindTag<Ks>{}), ...);
}

// The activation quantizers' loops: f(xs, t, rec) for each block of bcols columns and each token
// t < T of a tile, xs being token t's block and rec the block's record (record_bytes per token).
template <class F>
static inline __attribute__((always_inline)) void for_each_record(const float* x, int64_t ldx, int T, int64_t cols,
                                                                 int bcols, int record_bytes, uint8_t* rec, F&& f) {
  for (int64_t b = 0; b < cols / bcols; ++b, rec += T * record_bytes)
    for (int t = 0; t < T; ++t) f(x + t * ldx + bcols * b, t, rec);
}

// ---- run-time counts to compile-time tile sizes (kernels keep a tile's accumulators in registers,
// so each size is its own instantiation)

// f(KindTag<n>{}) for 1 <= n <= Max.
template <int Max, class F>
static inline __attribute__((always_inline)) void with_count(int64_t n, F&& f) {
  if constexpr (Max > 1) {
    if (n < Max) return with_count<Max - 1>(n, f);
  }
  f(KindTag<Max>{});
}

// Tiles of N along [0, n) and a last, smaller one: f(KindTag<N>{}, i) for i = 0, N, 2N, ... while a
// whole tile fits, then f(KindTag<n - i>{}, i) for the rest, if any.
template <int N, class F>
static inline __attribute__((always_inline)) void for_each_tile(int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + N <= n; i += N) f(KindTag<N>{}, i);
  if constexpr (N > 1) {
    if (i < n) with_count<N - 1>(n - i, [&](auto k) { f(k, i); });
  }
}

}  // namespace tmill::kern
