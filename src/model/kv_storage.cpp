#include "model/kv_storage.h"

#include <sys/mman.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/strings.h"

namespace tmill {

namespace {
constexpr size_t kHuge = size_t{2} << 20;
// Caches from this size on ask for huge pages. A small cache's 4 KiB faults cost little in all
// (64 MiB: ~160 ms over its lifetime), while its huge pages would be committed whole by the first
// short request (one 2 MiB page per layer's K and V): memory a small on-demand model did not need.
constexpr size_t kHugeFrom = size_t{64} << 20;
}  // namespace

std::optional<DType> kv_cache_dtype_named(std::string_view name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  if (name == "int8") return DType::I8;
  if (name == "q4_0") return DType::Q4_0;
  if (name == "fp8" || name == "fp8_e4m3") return DType::F8_E4M3;
  if (name == "fp8_e5m2") return DType::F8_E5M2;
  return std::nullopt;
}

const char* kv_cache_dtype_label(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I8: return "int8";
    case DType::Q4_0: return "q4_0";
    case DType::F8_E4M3: return "fp8_e4m3";
    case DType::F8_E5M2: return "fp8_e5m2";
    default: return "?";
  }
}

Status check_kv_cache_shape(DType t, int64_t block_size, int64_t head_dim) {
  if (t == DType::Q4_0 && (block_size % 2 != 0 || head_dim % 2 != 0))
    return Error{"--kv-cache-dtype q4_0 needs an even block size and head size"};
  return {};
}

size_t KvStorage::map_bytes() const { return (layout_.total_bytes() + 64 + kHuge - 1) / kHuge * kHuge + kHuge; }

Result<KvStorage> KvStorage::create(const KvLayout& layout) {
  if (!kv_type_supported(layout.dtype))
    return Error{fmt::format("KV cache dtype {} is not supported", dtype_name(layout.dtype))};
  if (layout.num_blocks <= 0) return Error{"KV cache needs at least one block"};
  KvStorage s;
  s.layout_ = layout;
  // Anonymous mapping: zero pages, committed as they are first written -- on huge pages where the
  // kernel gives them (THP "madvise" or "always"): a decode step that opens a new block in every
  // sequence first-touches each layer's K and V tiles, and 4 KiB faults cost ~10 us each on a VM
  // (512 MiB: 1.3 s) against ~0.2 us per 4 KiB as 2 MiB faults (29 ms); OLMoE's 16-stream step paid
  // ~5 % of its time in them. The mapping is 2 MiB aligned, so every huge page can be used; small
  // caches (below kHugeFrom) keep the kernel's default.
  void* p = mmap(nullptr, s.map_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Error{fmt::format("cannot reserve {} for the KV cache", format_bytes(layout.total_bytes()))};
  if (!layout.slot_shape.empty()) {
    s.slot_begin_.assign(1, 0);
    for (int64_t l = 0; l < layout.n_layer; ++l)
      s.slot_begin_.push_back(s.slot_begin_.back() + 2 * layout.block_bytes_of(l) * static_cast<size_t>(layout.num_blocks));
  }
  s.map_ = p;
  s.base_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHuge - 1) / kHuge * kHuge);
#ifdef MADV_HUGEPAGE
  if (layout.total_bytes() >= kHugeFrom)
    madvise(s.base_, s.map_bytes() - kHuge, MADV_HUGEPAGE);  // advice only: 4 KiB pages where refused
#endif
  return s;
}

KvStorage::~KvStorage() {
  if (map_) munmap(map_, map_bytes());
}

KvStorage::KvStorage(KvStorage&& o) noexcept
    : layout_(o.layout_),
      slot_begin_(std::move(o.slot_begin_)),
      map_(std::exchange(o.map_, nullptr)),
      base_(std::exchange(o.base_, nullptr)) {}

KvStorage& KvStorage::operator=(KvStorage&& o) noexcept {
  if (this != &o) {
    if (map_) munmap(map_, map_bytes());
    layout_ = o.layout_;
    slot_begin_ = std::move(o.slot_begin_);
    map_ = std::exchange(o.map_, nullptr);
    base_ = std::exchange(o.base_, nullptr);
  }
  return *this;
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  for (int64_t l = 0; l < layout_.n_layer; ++l) {
    const size_t bb = layout_.block_bytes_of(l);
    std::memcpy(keys(l) + dst * bb, keys(l) + src * bb, bb);
    std::memcpy(values(l) + dst * bb, values(l) + src * bb, bb);
  }
  const size_t cf = layout_.conv_floats_per_block();
  for (int64_t l = 0; l < layout_.n_conv_layers; ++l)
    std::memcpy(conv_state(l) + dst * cf, conv_state(l) + src * cf, cf * sizeof(float));
}

void KvStorage::copy_state(int32_t src, int32_t dst) {
  for (int64_t l = 0; l < layout_.n_state_layers; ++l)
    std::memcpy(seq_state(l, dst), seq_state(l, src), static_cast<size_t>(layout_.state_floats) * sizeof(float));
}

KvLayout KvLayout::for_model(const ModelConfig& c, int64_t block_size, int64_t num_blocks, DType dtype,
                             int64_t lookahead) {
  KvLayout lay;
  lay.n_layer = c.n_kv_layers();
  lay.n_head_kv = c.n_head_kv;
  lay.head_dim = c.head_dim;
  if (!c.layer_shape.empty()) {  // each K/V slot its layer's heads (gemma4)
    lay.slot_shape.assign(static_cast<size_t>(lay.n_layer), KvLayout::SlotShape{0, 0});
    for (int64_t l = 0; l < c.n_layer; ++l)
      if (c.has_attention(l) && c.stores_kv(l))
        lay.slot_shape[static_cast<size_t>(c.slot(l))] = {c.n_head_kv_of(l), c.head_dim_of(l)};
  }
  lay.block_size = block_size;
  lay.num_blocks = num_blocks;
  lay.dtype = dtype;
  lay.n_conv_layers = c.n_conv_layers();
  if (lay.n_conv_layers > 0) {
    lay.conv_width = c.n_embd;
    // (a ring as long as the block keeps every position of it: no slot is shared)
    lay.conv_ring = std::min<int64_t>(block_size, c.shortconv_l - 1 + std::max<int64_t>(lookahead, 0));
  }
  lay.n_state_layers = c.n_ssm_layers();
  if (lay.n_state_layers > 0) {  // one slot: one sequence (the engine's plan sets how many)
    lay.state_floats = c.ssm_state_floats();
    lay.num_state_slots = 1;
  }
  return lay;
}

}  // namespace tmill
