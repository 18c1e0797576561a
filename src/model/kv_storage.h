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
#include "model/config.h"

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
  int64_t n_layer = 0;  // layers with K/V (a model's attention layers: ModelConfig::n_kv_layers)
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  DType dtype = DType::F16;  // F32, F16, BF16, I8 / F8_E4M3 / F8_E5M2 (a per-token scale) or Q4_0
  // Convolution state (lfm2's short convolutions, model/shortconv.h), in float32 beside the K/V: per
  // convolution layer and block, the inputs of conv_ring of the block's positions, each conv_width
  // floats; position p's in slot p % conv_ring of the block holding p. A block thus keeps its last
  // conv_ring positions' inputs: what the next shortconv_l - 1 positions read, even after a prefix-cache
  // hit or a preemption, and after speculative tokens beyond them are rejected as long as conv_ring
  // covers shortconv_l - 1 plus the tokens a step may write past the accepted ones.
  int64_t n_conv_layers = 0;
  int64_t conv_width = 0;
  int64_t conv_ring = 0;
  // Sequence state (Mamba-2 mixers, model/mamba2.h), in float32 after the blocks: per mixer layer,
  // num_state_slots slots of state_floats (ModelConfig::ssm_state_floats). A recurrent state sums
  // every position before it, so it belongs to one sequence, not to blocks: the KV manager gives
  // each running request a slot (KvCacheConfig::num_state_slots), and a step starting at position 0
  // starts from a zero state whatever the slot held.
  int64_t n_state_layers = 0;
  int64_t state_floats = 0;
  int64_t num_state_slots = 0;

  // The layout of `c`'s cache: K/V for its attention layers, convolution state for the rest.
  // lookahead: the tokens a step may write beyond those later accepted (speculative decoding's
  // num_speculative_tokens; 0 without).
  static KvLayout for_model(const ModelConfig& c, int64_t block_size, int64_t num_blocks, DType dtype,
                            int64_t lookahead = 0);

  // Per K/V slot when the layers' heads differ (gemma4's sliding and full layers: ModelConfig::layer_shape):
  // its K/V heads and head size; empty: every slot n_head_kv heads of head_dim (n_head_kv and head_dim
  // then hold the largest).
  struct SlotShape {
    int64_t n_head_kv, head_dim;
  };
  std::vector<SlotShape> slot_shape = {};
  int64_t n_head_kv_of(int64_t slot) const {
    return slot_shape.empty() ? n_head_kv : slot_shape[static_cast<size_t>(slot)].n_head_kv;
  }
  int64_t head_dim_of(int64_t slot) const {
    return slot_shape.empty() ? head_dim : slot_shape[static_cast<size_t>(slot)].head_dim;
  }
  // Bytes of one block of one layer, keys only (a uniform layout's: slot_shape empty).
  size_t block_bytes_per_layer() const {
    return static_cast<size_t>(n_head_kv) * kv_tile_bytes(dtype, head_dim, block_size);
  }
  size_t block_bytes_of(int64_t slot) const {
    return static_cast<size_t>(n_head_kv_of(slot)) * kv_tile_bytes(dtype, head_dim_of(slot), block_size);
  }
  // Bytes one block costs in every K/V slot, keys only.
  size_t kv_block_bytes() const {
    if (slot_shape.empty()) return static_cast<size_t>(n_layer) * block_bytes_per_layer();
    size_t b = 0;
    for (int64_t l = 0; l < n_layer; ++l) b += block_bytes_of(l);
    return b;
  }
  // Floats of one block of one convolution layer's state.
  size_t conv_floats_per_block() const { return static_cast<size_t>(conv_ring * conv_width); }
  // Bytes one block costs across all layers, keys and values (and convolution state).
  size_t bytes_per_block() const {
    return 2 * kv_block_bytes() +
           static_cast<size_t>(n_conv_layers) * conv_floats_per_block() * sizeof(float);
  }
  // Bytes of every sequence-state slot of every mixer layer.
  size_t state_bytes() const {
    return static_cast<size_t>(n_state_layers * state_floats * num_state_slots) * sizeof(float);
  }
  size_t total_bytes() const { return bytes_per_block() * static_cast<size_t>(num_blocks) + state_bytes(); }
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
    return {keys(layer), values(layer), layout_.dtype, layout_.n_head_kv_of(layer), layout_.block_size,
            layout_.head_dim_of(layer)};
  }
  uint8_t* keys(int64_t layer) const { return base_ + layer_offset(layer, 0); }
  uint8_t* values(int64_t layer) const { return base_ + layer_offset(layer, 1); }
  // Convolution layer `slot`'s state (ModelConfig::cache_slot): num_blocks x conv_floats_per_block().
  float* conv_state(int64_t slot) const {
    return reinterpret_cast<float*>(base_ + (layer_offset(layout_.n_layer, 0) + 63) / 64 * 64) +
           static_cast<size_t>(slot) * layout_.conv_floats_per_block() * static_cast<size_t>(layout_.num_blocks);
  }
  // Mixer layer `layer`'s (ModelConfig::cache_slot) state in slot `slot`: state_floats floats.
  float* seq_state(int64_t layer, int32_t slot) const {
    return conv_state(layout_.n_conv_layers) +
           (static_cast<size_t>(layer) * static_cast<size_t>(layout_.num_state_slots) + static_cast<size_t>(slot)) *
               static_cast<size_t>(layout_.state_floats);
  }
  // Copies every layer's K and V of block src into block dst (copy-on-write for shared blocks).
  void copy_block(int32_t src, int32_t dst);
  // Copies every mixer layer's state of slot src into slot dst (a forked sequence's).
  void copy_state(int32_t src, int32_t dst);

 private:
  // slot `layer`'s keys (kv 0) or values (kv 1); layer n_layer: the end of the K/V
  size_t layer_offset(int64_t layer, int kv) const {
    const size_t blocks = static_cast<size_t>(layout_.num_blocks);
    if (layout_.slot_shape.empty())
      return (static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * layout_.block_bytes_per_layer() * blocks;
    const size_t begin = slot_begin_[static_cast<size_t>(layer)];
    return layer < layout_.n_layer ? begin + static_cast<size_t>(kv) * layout_.block_bytes_of(layer) * blocks : begin;
  }
  // the mapping: the layout's bytes (and 64 to align the convolution state) rounded up to 2 MiB, plus
  // 2 MiB to align
  size_t map_bytes() const;
  KvLayout layout_;
  std::vector<size_t> slot_begin_;  // (slot_shape's layouts) each slot's first byte, and the end
  void* map_ = nullptr;
  uint8_t* base_ = nullptr;  // 2 MiB aligned inside the mapping
};

}  // namespace tmill
