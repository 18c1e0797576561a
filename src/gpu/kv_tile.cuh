// The paged KV cache's tiles on the device, in the CPU cache's layouts (kernels/attention_abi.h): one
// (block, KV head) tile holds K as [head_dim][block_size] and V as [block_size][head_dim], in F16, or
// INT8 or FP8 (E4M3, E5M2) with an f32 scale per position after the codes, or Q4 (4-bit codes, value scale * (q - 8), an
// f16 scale per position and group of kv_q4_group dimensions after the nibbles). Read element by
// element as float (KvTile<T>::k / v) by the attention kernels and written by kv_store (elementwise.cu)
// with the CPU's own rounding (kernels/attention.cpp paged_kv_store), so the two caches hold the same
// bytes. Included by .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/fp8.h"

namespace tmill::gpu::inline TM_GPU_ABI {

// kernels/attention_abi.h kv_q4_group (a host-only constexpr; this copy serves device and launch code).
__host__ __device__ __forceinline__ int64_t kv_q4_group_dev(int64_t head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }

template <DType T>
struct KvTile;

template <>
struct KvTile<DType::F16> {
  __device__ static size_t bytes(int64_t hd, int64_t bs) { return static_cast<size_t>(hd * bs) * 2; }
  // dimension d of position j's key; position j's value in dimension d
  __device__ static float k(const uint8_t* t, int64_t /*hd*/, int64_t bs, int64_t d, int64_t j) {
    return __half2float(reinterpret_cast<const __half*>(t)[d * bs + j]);
  }
  __device__ static float v(const uint8_t* t, int64_t hd, int64_t /*bs*/, int64_t j, int64_t d) {
    return __half2float(reinterpret_cast<const __half*>(t)[j * hd + d]);
  }
};

// A one-byte code per element and an f32 scale per position after the codes: INT8, and FP8 (E4M3 codes
// widen through FP16 at 1/256 of their value, core/fp8.h, so 256 joins the scale).
template <DType T>
struct KvTokenScaled {
  __device__ static size_t bytes(int64_t hd, int64_t bs) { return static_cast<size_t>(hd * bs + 4 * bs); }
  __device__ static float scale(const uint8_t* t, int64_t hd, int64_t bs, int64_t j) {
    float s;
    memcpy(&s, t + hd * bs + j * 4, 4);  // 4-byte aligned only when hd * bs is
    return s;
  }
  __device__ static float code(uint8_t b) {
    if constexpr (T == DType::F8_E4M3) return __half2float(__ushort_as_half(fp8_e4m3_f16_bits_div256(b))) * 256.0f;
    if constexpr (T == DType::F8_E5M2) return __half2float(__ushort_as_half(fp8_e5m2_f16_bits(b)));
    return static_cast<float>(static_cast<int8_t>(b));
  }
  __device__ static float k(const uint8_t* t, int64_t hd, int64_t bs, int64_t d, int64_t j) {
    return scale(t, hd, bs, j) * code(t[d * bs + j]);
  }
  __device__ static float v(const uint8_t* t, int64_t hd, int64_t bs, int64_t j, int64_t d) {
    return scale(t, hd, bs, j) * code(t[j * hd + d]);
  }
};
template <>
struct KvTile<DType::I8> : KvTokenScaled<DType::I8> {};
template <>
struct KvTile<DType::F8_E4M3> : KvTokenScaled<DType::F8_E4M3> {};
template <>
struct KvTile<DType::F8_E5M2> : KvTokenScaled<DType::F8_E5M2> {};

template <>
struct KvTile<DType::Q4_0> {
  __device__ static size_t bytes(int64_t hd, int64_t bs) {
    return static_cast<size_t>(hd * bs / 2 + bs * (hd / kv_q4_group_dev(hd)) * 2);
  }
  __device__ static float half_at(const uint8_t* p) {
    __half h;
    memcpy(&h, p, 2);
    return __half2float(h);
  }
  // K: nibbles [d][bs / 2] (position 2i low, 2i + 1 high), then f16 scales [group][bs]
  __device__ static float k(const uint8_t* t, int64_t hd, int64_t bs, int64_t d, int64_t j) {
    const uint8_t b = t[d * (bs / 2) + j / 2];
    const int q = (j & 1) ? b >> 4 : b & 15;
    return half_at(t + hd * bs / 2 + ((d / kv_q4_group_dev(hd)) * bs + j) * 2) * static_cast<float>(q - 8);
  }
  // V: nibbles [bs][hd / 2] (dimension 2i low, 2i + 1 high), then f16 scales [bs][group]
  __device__ static float v(const uint8_t* t, int64_t hd, int64_t bs, int64_t j, int64_t d) {
    const int64_t gs = kv_q4_group_dev(hd);
    const uint8_t b = t[j * (hd / 2) + d / 2];
    const int q = (d & 1) ? b >> 4 : b & 15;
    return half_at(t + hd * bs / 2 + (j * (hd / gs) + d / gs) * 2) * static_cast<float>(q - 8);
  }
};

}  // namespace tmill::gpu::inline TM_GPU_ABI
