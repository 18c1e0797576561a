#include "model/kv_storage.h"

#include <sys/mman.h>

#include <cstring>

#include <fmt/format.h>

#include "core/strings.h"

namespace tmill {

Result<KvStorage> KvStorage::create(const KvLayout& layout) {
  if (!kv_type_supported(layout.dtype))
    return Error{fmt::format("KV cache dtype {} is not supported", dtype_name(layout.dtype))};
  if (layout.num_blocks <= 0) return Error{"KV cache needs at least one block"};
  KvStorage s;
  s.layout_ = layout;
  s.bytes_ = layout.total_bytes();
  // Anonymous mapping: zero pages, committed as they are first written.
  void* p = mmap(nullptr, s.bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Error{fmt::format("cannot reserve {} for the KV cache", format_bytes(s.bytes_))};
  s.base_ = static_cast<uint8_t*>(p);
  return s;
}

KvStorage::~KvStorage() {
  if (base_) munmap(base_, bytes_);
}

KvStorage::KvStorage(KvStorage&& o) noexcept : layout_(o.layout_), base_(o.base_), bytes_(o.bytes_) {
  o.base_ = nullptr;
  o.bytes_ = 0;
}

KvStorage& KvStorage::operator=(KvStorage&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, bytes_);
    layout_ = o.layout_;
    base_ = o.base_;
    bytes_ = o.bytes_;
    o.base_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  const size_t bb = layout_.block_bytes_per_layer();
  for (int64_t l = 0; l < layout_.n_layer; ++l) {
    std::memcpy(keys(l) + dst * bb, keys(l) + src * bb, bb);
    std::memcpy(values(l) + dst * bb, values(l) + src * bb, bb);
  }
}

}  // namespace tmill
