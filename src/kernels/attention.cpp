#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/fp8.h"
#include "kernels/ops.h"
#include "core/log.h"
#include "kernels/attention_abi.h"
#include "kernels/dispatch.h"

namespace tmill {
namespace {

int kv_type_code(DType t) {
  switch (t) {
    case DType::F32: return kern::kKvF32;
    case DType::F16: return kern::kKvF16;
    case DType::BF16: return kern::kKvBF16;
    case DType::Q4_0: return kern::kKvQ4;
    case DType::F8_E4M3: return kern::kKvF8E4M3;
    case DType::F8_E5M2: return kern::kKvF8E5M2;
    default: return kern::kKvI8;
  }
}

kern::AttnArgs make_args(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                         const int32_t* block_table, int64_t n_ctx, float scale, float* out, AttnMask mask) {
  TM_ASSERT(mask.begin >= 0 && mask.begin < n_ctx, "attention window starts outside the context");
  kern::AttnArgs a;
  a.q = q;
  a.group = group;
  a.head_dim = kv.head_dim;
  a.block_size = kv.block_size;
  a.k_base = kv.k;
  a.v_base = kv.v;
  a.tile_bytes = static_cast<int64_t>(kv.tile_bytes());
  a.n_head_kv = kv.n_head_kv;
  a.kv_head = kv_head;
  a.block_table = block_table;
  a.n_ctx = n_ctx;
  a.ctx_begin = mask.begin;
  a.scale = scale;
  a.softcap = mask.softcap;
  a.sinks = mask.sinks;
  a.alibi = mask.alibi;
  a.kv_type = kv_type_code(kv.dtype);
  a.out = out;
  return a;
}

}  // namespace

namespace kern {

// The tiles of a sequence are scattered through the KV pool, so the hardware prefetcher loses the
// stream at every block; in a batched decode step the KV comes from DRAM and the kernels waited on it
// (bench_attention BM_AttentionDecodeStep, one thread: AVX-512 F16 37-41 -> 51-52 GFLOPS, I8 36-37
// -> 66; AVX2 F16 31 -> 45, I8 32 -> 52; a hot ctx-128 call pays ~5 % / ~2 %). L2, not L1: T0
// gained less. One call per 16-token block, so it lives here rather than inline in each ISA file.
void prefetch_kv_block(const AttnArgs& a, int64_t b) {
  const int64_t tile = kv_tile(a.block_table[b], a.n_head_kv, a.kv_head);
  const char* k = reinterpret_cast<const char*>(a.k_base + tile * a.tile_bytes);
  const char* v = reinterpret_cast<const char*>(a.v_base + tile * a.tile_bytes);
  // asm volatile: GCC 12 deletes a loop of _mm_prefetch with a run-time trip count (tree DCE).
  for (int64_t off = 0; off < a.tile_bytes * a.n_kv; off += 64) {
#if defined(__x86_64__)
    asm volatile("prefetcht1 %0" : : "m"(k[off]));
    asm volatile("prefetcht1 %0" : : "m"(v[off]));
#else
    __builtin_prefetch(k + off, 0, 2);  // no SIMD kernel calls it there yet
    __builtin_prefetch(v + off, 0, 2);
#endif
  }
}

}  // namespace kern

bool kv_type_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::I8 || t == DType::Q4_0 ||
         t == DType::F8_E4M3 || t == DType::F8_E5M2;
}

size_t kv_tile_bytes(DType t, int64_t head_dim, int64_t block_size) {
  const auto n = static_cast<size_t>(head_dim * block_size);
  switch (t) {
    case DType::F32: return n * 4;
    case DType::F16:
    case DType::BF16: return n * 2;
    case DType::Q4_0:  // nibbles + an f16 scale per token and group of dimensions
      return n / 2 + static_cast<size_t>(block_size * (head_dim / kern::kv_q4_group(head_dim))) * 2;
    default: return n + static_cast<size_t>(block_size) * 4;  // int8 or fp8 + f32 scale per token
  }
}

void paged_attention_group_reference(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                                     const int32_t* block_table, int64_t n_ctx, float scale, float* out,
                                     AttnMask mask) {
  kern::attention_scalar(make_args(q, group, kv_head, kv, block_table, n_ctx, scale, out, mask));
}

namespace {

// The ISA's kernel where it covers the call; several heads it does not take together go one by one
// (the scalar kernel takes one KV head), and a group wider than the SIMD kernels take (16 query heads, 8
// of 512 dimensions) in such chunks: Falcon-7B's 71 query heads on one KV head ran on the scalar kernel before -- its
// decode at 1.3 tok/s against llama.cpp's 3.3 on an AMD EPYC Zen 3.
void run_attention(const kern::AttnArgs& a) {
  const int64_t kChunk = kern::attn_max_heads(a.head_dim);  // (16; 8 for gemma4's 512-wide heads)
  const kern::KernelTable& t = kern::kernels();
  if (t.attention_covers(a)) {
    t.attention[a.kv_type](a);
  } else if (a.n_kv > 1) {
    for (int64_t j = 0; j < a.n_kv; ++j) run_attention(kern::attn_head(a, j));
  } else if (a.group > kChunk) {
    for (int64_t g0 = 0; g0 < a.group; g0 += kChunk)
      run_attention(kern::attn_group_chunk(a, g0, a.group - g0 < kChunk ? a.group - g0 : kChunk));
  } else {
    kern::attention_scalar(a);
  }
}

}  // namespace

int64_t paged_attention_max_heads(int64_t head_dim) { return kern::attn_max_heads(head_dim); }

void paged_attention_group(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                           const int32_t* block_table, int64_t n_ctx, float scale, float* out, AttnMask mask) {
  run_attention(make_args(q, group, kv_head, kv, block_table, n_ctx, scale, out, mask));
}

void paged_attention_heads(const float* q, int64_t group, int64_t kv_head, int64_t n_kv, const PagedKvView& kv,
                           const int32_t* block_table, int64_t n_ctx, float scale, float* out, AttnMask mask) {
  TM_ASSERT(n_kv >= 1 && kv_head + n_kv <= kv.n_head_kv, "attention heads outside the KV cache");
  kern::AttnArgs a = make_args(q, group, kv_head, kv, block_table, n_ctx, scale, out, mask);
  a.n_kv = n_kv;
  run_attention(a);
}

namespace {

// q4_0's rounding: the value of largest magnitude maps to -8, d = max / -8, q = min(15, x / d + 8.5).
// Writes the codes of x[0..n) through put(i, q) and returns the f16 scale.
template <class Put>
uint16_t quantize_q4_group(const float* x, int64_t n, Put put) {
  float amax = 0, mx = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      mx = x[i];
    }
  const float d = mx / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (int64_t i = 0; i < n; ++i) put(i, static_cast<uint8_t>(std::min(15, static_cast<int>(x[i] * id + 8.5f))));
  return fp32_to_fp16(d);
}

void set_nibble(uint8_t* byte, int64_t which, uint8_t q) {
  *byte = which & 1 ? static_cast<uint8_t>((*byte & 0x0F) | (q << 4)) : static_cast<uint8_t>((*byte & 0xF0) | q);
}

void store_q4(uint8_t* kt, uint8_t* vt, int64_t bs, int64_t hd, int64_t slot, const float* kh, const float* vh) {
  const int64_t gs = kern::kv_q4_group(hd), ng = hd / gs;
  for (int64_t g = 0; g < ng; ++g) {
    const uint16_t ks = quantize_q4_group(kh + g * gs, gs, [&](int64_t i, uint8_t q) {
      set_nibble(kt + (g * gs + i) * (bs / 2) + slot / 2, slot, q);
    });
    std::memcpy(kt + hd * bs / 2 + (g * bs + slot) * 2, &ks, 2);
    const uint16_t vs = quantize_q4_group(vh + g * gs, gs, [&](int64_t i, uint8_t q) {
      set_nibble(vt + slot * (hd / 2) + (g * gs + i) / 2, g * gs + i, q);
    });
    std::memcpy(vt + hd * bs / 2 + (slot * ng + g) * 2, &vs, 2);
  }
}

// A one-byte code per element and an f32 scale per token: max |x| maps to the largest code (int8:
// 127, codes rint(x / scale); fp8: 448 or 57344, codes core/fp8.h's nearest). The GPU's kv_store
// (gpu/elementwise.cu) repeats these operations in this order. A template per type: the store runs
// for every token of every layer, so the type is not looked at per element.
template <DType T>
uint8_t token_code(float x) {
  if constexpr (T == DType::F8_E4M3) return fp32_to_fp8_e4m3(x);
  if constexpr (T == DType::F8_E5M2) return fp32_to_fp8_e5m2(x);
  return static_cast<uint8_t>(static_cast<int8_t>(std::lrintf(x)));
}

template <DType T>
void store_token_scaled(uint8_t* kt, uint8_t* vt, int64_t bs, int64_t hd, int64_t slot, const float* kh,
                        const float* vh) {
  constexpr float top = T == DType::F8_E4M3 ? kFp8E4M3Max : T == DType::F8_E5M2 ? kFp8E5M2Max : 127.0f;
  float km = 0, vm = 0;
  for (int64_t d = 0; d < hd; ++d) {
    km = std::fmax(km, std::fabs(kh[d]));
    vm = std::fmax(vm, std::fabs(vh[d]));
  }
  const float ks = km / top, vs = vm / top;
  const float ki = ks > 0 ? 1.0f / ks : 0.0f, vi = vs > 0 ? 1.0f / vs : 0.0f;
  for (int64_t d = 0; d < hd; ++d) {
    kt[d * bs + slot] = token_code<T>(kh[d] * ki);
    vt[slot * hd + d] = token_code<T>(vh[d] * vi);
  }
  std::memcpy(kt + hd * bs + slot * 4, &ks, 4);
  std::memcpy(vt + hd * bs + slot * 4, &vs, 4);
}

// The value of a one-byte code (paged_kv_load: tests and references, not a hot path).
float token_value(DType t, uint8_t code) {
  if (t == DType::F8_E4M3) return fp8_e4m3_to_fp32(code);
  if (t == DType::F8_E5M2) return fp8_e5m2_to_fp32(code);
  return static_cast<float>(static_cast<int8_t>(code));
}

}  // namespace

void paged_kv_prefetch_store(const PagedKvView& kv, const int32_t* block_table, int64_t pos) {
  const int64_t bs = kv.block_size, slot = pos % bs;
  const size_t tb = kv.tile_bytes();
  const size_t first = static_cast<size_t>(kern::kv_tile(block_table[pos / bs], kv.n_head_kv, 0)) * tb;
  const size_t k_bytes = static_cast<size_t>(kv.n_head_kv) * tb;  // the block's K tiles: one run
  for (size_t off = 0; off < k_bytes; off += 64) __builtin_prefetch(kv.k + first + off, 1, 3);
  // V: the slot's row in each head's tile (token-major; for the int8 and Q4 tiles, whose scales
  // follow the rows, an estimate off by a few bytes)
  const size_t row_bytes = tb / static_cast<size_t>(bs), row = static_cast<size_t>(slot) * row_bytes;
  for (int64_t h = 0; h < kv.n_head_kv; ++h)
    for (size_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(kv.v + first + static_cast<size_t>(h) * tb + row + off, 1, 3);
}

void paged_kv_store(const PagedKvView& kv, const int32_t* block_table, int64_t pos, const float* k, const float* v) {
  const int64_t bs = kv.block_size, hd = kv.head_dim, slot = pos % bs;
  const size_t tb = kv.tile_bytes();
  const int64_t block = block_table[pos / bs];
  for (int64_t h = 0; h < kv.n_head_kv; ++h) {
    const size_t off = static_cast<size_t>(kern::kv_tile(block, kv.n_head_kv, h)) * tb;
    uint8_t* kt = kv.k + off;
    uint8_t* vt = kv.v + off;
    const float* kh = k + h * hd;
    const float* vh = v + h * hd;
    switch (kv.dtype) {
      case DType::F32:
        for (int64_t d = 0; d < hd; ++d) reinterpret_cast<float*>(kt)[d * bs + slot] = kh[d];
        std::memcpy(reinterpret_cast<float*>(vt) + slot * hd, vh, static_cast<size_t>(hd) * 4);
        break;
      case DType::F16: {
        // converted by the ISA's vector instruction (the software conversion was ~3 % of a batched
        // decode step and more of a prefill), K through a buffer to its transposed slots
        constexpr int64_t kMaxHd = 1024;
        uint16_t kb[kMaxHd];
        auto* k16 = reinterpret_cast<uint16_t*>(kt);
        for (int64_t d0 = 0; d0 < hd; d0 += kMaxHd) {
          const int64_t m = hd - d0 < kMaxHd ? hd - d0 : kMaxHd;
          f32_to_f16(kh + d0, kb, m);
          for (int64_t d = 0; d < m; ++d) k16[(d0 + d) * bs + slot] = kb[d];
        }
        f32_to_f16(vh, reinterpret_cast<uint16_t*>(vt) + slot * hd, hd);
        break;
      }
      case DType::BF16:
        for (int64_t d = 0; d < hd; ++d) {
          reinterpret_cast<uint16_t*>(kt)[d * bs + slot] = fp32_to_bf16(kh[d]);
          reinterpret_cast<uint16_t*>(vt)[slot * hd + d] = fp32_to_bf16(vh[d]);
        }
        break;
      case DType::Q4_0:
        store_q4(kt, vt, bs, hd, slot, kh, vh);
        break;
      case DType::F8_E4M3:
        store_token_scaled<DType::F8_E4M3>(kt, vt, bs, hd, slot, kh, vh);
        break;
      case DType::F8_E5M2:
        store_token_scaled<DType::F8_E5M2>(kt, vt, bs, hd, slot, kh, vh);
        break;
      default:
        store_token_scaled<DType::I8>(kt, vt, bs, hd, slot, kh, vh);
        break;
    }
  }
}

void paged_kv_load(const PagedKvView& kv, const int32_t* block_table, int64_t pos, int64_t h, float* k, float* v) {
  const int64_t bs = kv.block_size, hd = kv.head_dim, slot = pos % bs;
  const size_t tb = kv.tile_bytes();
  const int64_t block = block_table[pos / bs];
  const size_t off = static_cast<size_t>(kern::kv_tile(block, kv.n_head_kv, h)) * tb;
  const uint8_t* kt = kv.k + off;
  const uint8_t* vt = kv.v + off;
  if (kv.dtype == DType::Q4_0) {
    const int64_t gs = kern::kv_q4_group(hd), ng = hd / gs;
    for (int64_t d = 0; d < hd; ++d) {
      uint16_t ks, vs;
      std::memcpy(&ks, kt + hd * bs / 2 + ((d / gs) * bs + slot) * 2, 2);
      std::memcpy(&vs, vt + hd * bs / 2 + (slot * ng + d / gs) * 2, 2);
      const uint8_t kb = kt[d * (bs / 2) + slot / 2], vb = vt[slot * (hd / 2) + d / 2];
      k[d] = fp16_to_fp32(ks) * static_cast<float>(((slot & 1) ? kb >> 4 : kb & 15) - 8);
      v[d] = fp16_to_fp32(vs) * static_cast<float>(((d & 1) ? vb >> 4 : vb & 15) - 8);
    }
    return;
  }
  for (int64_t d = 0; d < hd; ++d) {
    switch (kv.dtype) {
      case DType::F32:
        k[d] = reinterpret_cast<const float*>(kt)[d * bs + slot];
        v[d] = reinterpret_cast<const float*>(vt)[slot * hd + d];
        break;
      case DType::F16:
        k[d] = fp16_to_fp32(reinterpret_cast<const uint16_t*>(kt)[d * bs + slot]);
        v[d] = fp16_to_fp32(reinterpret_cast<const uint16_t*>(vt)[slot * hd + d]);
        break;
      case DType::BF16:
        k[d] = bf16_to_fp32(reinterpret_cast<const uint16_t*>(kt)[d * bs + slot]);
        v[d] = bf16_to_fp32(reinterpret_cast<const uint16_t*>(vt)[slot * hd + d]);
        break;
      default: {
        float ks, vs;
        std::memcpy(&ks, kt + hd * bs + slot * 4, 4);
        std::memcpy(&vs, vt + hd * bs + slot * 4, 4);
        k[d] = ks * token_value(kv.dtype, kt[d * bs + slot]);
        v[d] = vs * token_value(kv.dtype, vt[slot * hd + d]);
        break;
      }
    }
  }
}

}  // namespace tmill
