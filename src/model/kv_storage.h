// Memory for the paged KV cache. Block management (which request owns which block) lives in
// src/kv/; this is only the storage the attention kernels read and write.
//
// Per layer, keys and values each form one array of (num_blocks, n_head_kv) tiles; the layout inside
// a tile (K transposed, V token-major, int8 scales) belongs to the attention kernels
// (kernels/attention_abi.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "core/result.h"
#include "kernels/attention.h"

namespace tmill {

// --kv-cache-dtype's names, as vLLM and llama.cpp users write them: f32, f16, bf16, int8, q4_0, and
// vLLM's fp8 (E4M3, its meaning on CUDA), fp8_e4m3, fp8_e5m2 -- here with a scale per token and head
// (int8's layout), not vLLM's one per tensor. "auto" is the caller's to resolve; nullopt: no such name.
inline constexpr std::string_view kKvCacheDtypeNames = "auto, f32, f16, bf16, int8, q4_0, fp8, fp8_e4m3, fp8_e5m2";
std::optional<DType> kv_cache_dtype_named(std::string_view name);
// The name a KV element type goes by ("int8", "fp8_e4m3"); "?" for other types.
const char* kv_cache_dtype_label(DType t);
// The layout's own constraint: q4_0 packs two positions (K) or two dimensions (V) per byte.
Status check_kv_cache_shape(DType t, int64_t block_size, int64_t head_dim);

struct KvLayout {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  DType dtype = DType::F16;  // F32, F16, BF16, I8 / F8_E4M3 / F8_E5M2 (a per-token scale) or Q4_0

  // Bytes of one block of one layer, keys only.
  size_t block_bytes_per_layer() const {
    return static_cast<size_t>(n_head_kv) * kv_tile_bytes(dtype, head_dim, block_size);
  }
  // Bytes one block costs across all layers, keys and values.
  size_t bytes_per_block() const { return 2 * static_cast<size_t>(n_layer) * block_bytes_per_layer(); }
  size_t total_bytes() const { return bytes_per_block() * static_cast<size_t>(num_blocks); }
};

class KvStorage {
 public:
  static Result<KvStorage> create(const KvLayout& layout);
  KvStorage() = default;
  ~KvStorage();
  KvStorage(KvStorage&&) noexcept;
  KvStorage& operator=(KvStorage&&) noexcept;
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvLayout& layout() const { return layout_; }
  PagedKvView view(int64_t layer) const {
    return {keys(layer), values(layer), layout_.dtype, layout_.n_head_kv, layout_.block_size, layout_.head_dim};
  }
  uint8_t* keys(int64_t layer) const { return base_ + layer_offset(layer, 0); }
  uint8_t* values(int64_t layer) const { return base_ + layer_offset(layer, 1); }
  // Copies every layer's K and V of block src into block dst (copy-on-write for shared blocks).
  void copy_block(int32_t src, int32_t dst);

 private:
  size_t layer_offset(int64_t layer, int kv) const {
    return (static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * layout_.block_bytes_per_layer() *
           static_cast<size_t>(layout_.num_blocks);
  }
  size_t map_bytes() const;  // the mapping: the layout's bytes rounded up to 2 MiB, plus 2 MiB to align
  KvLayout layout_;
  void* map_ = nullptr;
  uint8_t* base_ = nullptr;  // 2 MiB aligned inside the mapping
};

}  // namespace tmill
