// Repacking of GGUF weight rows into the interleaved x16 layouts of kernels/kernel_abi.h.
// Every packed kind is written from unsigned per-element levels q (the integer the block stores,
// before its zero point / scale) plus the per-row block parameters, so the layout code is shared.
#include "kernels/pack.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/fp16.h"
#include "core/log.h"
#include "kernels/kernel_abi.h"
#include "quant/blocks.h"

namespace tmill::kern {
namespace {

// f16 bit pattern -> bf16 bit pattern (rounded to nearest even), for the bf16 copy of F16 weights: a
// 128 KiB table that stays in L2 turns the per-element conversion into one load (the load of a
// 0.5B F16 model spent ~35 % of its time in that conversion).
const uint16_t* f16_to_bf16_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp32_to_bf16(fp16_to_fp32(static_cast<uint16_t>(h)));
    return t;
  }();
  return table.data();
}

// One row's block decoded into levels and parameters.
struct RowBlock {
  uint8_t q[256];                  // levels: Q8_0 int8+128, Q4 0..15, Q5 0..31, Q6_K 0..63, IQ4 / MXFP4 indices,
                                   // Q2_K 0..3, Q3_K 0..7
  uint16_t d = 0, m = 0;           // f16 scale (MXFP4: the E8M0 byte) and min (Q4_1/Q5_1) or dmin (Q4_K/Q5_K)
  uint8_t sc[16] = {}, mins[8] = {};  // sub-block scales (Q6_K, IQ4_XS, Q3_K: int8 bit patterns; Q2_K:
                                      // scale | min << 4) and mins
};

void decode_legacy(int kind, const uint8_t* src, RowBlock* o) {
  switch (kind) {
    case kPackQ8_0: {
      BlockQ8_0 b;
      std::memcpy(&b, src, sizeof b);
      o->d = b.d;
      for (int i = 0; i < 32; ++i) o->q[i] = static_cast<uint8_t>(b.qs[i] + 128);
      return;
    }
    case kPackQ4_0:
    case kPackQ4_1: {
      const uint8_t* qs;
      if (kind == kPackQ4_0) {
        BlockQ4_0 b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        qs = src + 2;
      } else {
        BlockQ4_1 b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        o->m = b.m;
        qs = src + 4;
      }
      for (int j = 0; j < 16; ++j) {
        o->q[j] = qs[j] & 0xF;
        o->q[j + 16] = qs[j] >> 4;
      }
      return;
    }
    case kPackQ5_0:
    case kPackQ5_1: {
      uint32_t qh;
      const uint8_t* qs;
      if (kind == kPackQ5_0) {
        BlockQ5_0 b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        std::memcpy(&qh, b.qh, 4);
        qs = src + 6;
      } else {
        BlockQ5_1 b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        o->m = b.m;
        std::memcpy(&qh, b.qh, 4);
        qs = src + 8;
      }
      for (int j = 0; j < 16; ++j) {
        o->q[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((qh >> j) & 1) << 4));
        o->q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      }
      return;
    }
    case kPackIQ4_NL: {
      BlockIQ4_NL b;
      std::memcpy(&b, src, sizeof b);
      o->d = b.d;
      for (int j = 0; j < 16; ++j) {
        o->q[j] = b.qs[j] & 0xF;
        o->q[j + 16] = b.qs[j] >> 4;
      }
      return;
    }
    case kPackMXFP4: {
      BlockMXFP4 b;
      std::memcpy(&b, src, sizeof b);
      o->d = b.e;  // the E8M0 byte
      for (int j = 0; j < 16; ++j) {
        o->q[j] = b.qs[j] & 0xF;
        o->q[j + 16] = b.qs[j] >> 4;
      }
      return;
    }
    default: TM_ASSERT(false, "decode_legacy: not a 32-element kind");
  }
}

void decode_kquant(int kind, const uint8_t* src, RowBlock* o) {
  switch (kind) {
    case kPackQ4_K:
    case kPackQ5_K: {
      const uint8_t* scales;
      const uint8_t* qs;
      const uint8_t* qh = nullptr;
      if (kind == kPackQ4_K) {
        BlockQ4_K b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        o->m = b.dmin;
        scales = src + offsetof(BlockQ4_K, scales);
        qs = src + offsetof(BlockQ4_K, qs);
      } else {
        BlockQ5_K b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        o->m = b.dmin;
        scales = src + offsetof(BlockQ5_K, scales);
        qs = src + offsetof(BlockQ5_K, qs);
        qh = src + offsetof(BlockQ5_K, qh);
      }
      for (int j = 0; j < 8; ++j) get_scale_min_k4(j, scales, &o->sc[j], &o->mins[j]);
      for (int e = 0; e < 256; ++e) {
        const int p = e / 64, l = e % 32;
        const uint8_t byte = qs[32 * p + l];
        int v = (e % 64) < 32 ? (byte & 0xF) : (byte >> 4);
        if (qh) v |= ((qh[l] >> (e / 32)) & 1) << 4;
        o->q[e] = static_cast<uint8_t>(v);
      }
      return;
    }
    case kPackQ6_K: {
      BlockQ6_K b;
      std::memcpy(&b, src, sizeof b);
      o->d = b.d;
      for (int j = 0; j < 16; ++j) o->sc[j] = static_cast<uint8_t>(b.scales[j]);
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, r = e % 128, l = r % 32, k = r / 32;
        const int lo = (b.ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
        const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
        o->q[e] = static_cast<uint8_t>(lo | (hi << 4));
      }
      return;
    }
    case kPackIQ4_XS: {
      BlockIQ4_XS b;
      std::memcpy(&b, src, sizeof b);
      o->d = b.d;
      for (int j = 0; j < 8; ++j) o->sc[j] = static_cast<uint8_t>(static_cast<int8_t>(iq4xs_scale(j, b)));
      for (int e = 0; e < 256; ++e) {
        const uint8_t byte = b.qs[16 * (e / 32) + e % 16];
        o->q[e] = (e % 32) < 16 ? (byte & 0xF) : (byte >> 4);
      }
      return;
    }
    case kPackQ2_K:
    case kPackQ3_K: {
      // Low 2 bits of element e: byte qs[32 * (e / 128) + e % 32], bits 2 * ((e % 128) / 32).
      const uint8_t* qs;
      const uint8_t* hmask = nullptr;
      if (kind == kPackQ2_K) {
        BlockQ2_K b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        o->m = b.dmin;
        for (int j = 0; j < 16; ++j) o->sc[j] = b.scales[j];  // scale | min << 4, kept as stored
        qs = src + offsetof(BlockQ2_K, qs);
      } else {
        BlockQ3_K b;
        std::memcpy(&b, src, sizeof b);
        o->d = b.d;
        for (int j = 0; j < 16; ++j) o->sc[j] = static_cast<uint8_t>(static_cast<int8_t>(q3k_scale(j, b.scales)));
        qs = src + offsetof(BlockQ3_K, qs);
        hmask = src + offsetof(BlockQ3_K, hmask);
      }
      for (int e = 0; e < 256; ++e) {
        int v = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        if (hmask) v |= ((hmask[e % 32] >> (e / 32)) & 1) << 2;
        o->q[e] = static_cast<uint8_t>(v);
      }
      return;
    }
    default: TM_ASSERT(false, "decode_kquant: not a 256-column kind");
  }
}

void put_f16(uint8_t* base, int r, uint16_t v) { std::memcpy(base + 2 * r, &v, 2); }

// 32 levels of row r -> nibble chunks [4 c][16 r][4]: low = level 4c+i, high = level 16+4c+i.
void put_nibbles(uint8_t* n, int r, const uint8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 4; ++i)
      n[(c * 16 + r) * 4 + i] = static_cast<uint8_t>((q[4 * c + i] & 0xF) | ((q[16 + 4 * c + i] & 0xF) << 4));
}

// Fifth bits of 32 levels -> [16 r][4]: byte i bit c = bit 4 of level 4c+i.
void put_hbits(uint8_t* h, int r, const uint8_t* q) {
  for (int i = 0; i < 4; ++i) {
    int v = 0;
    for (int c = 0; c < 8; ++c) v |= ((q[4 * c + i] >> 4) & 1) << c;
    h[r * 4 + i] = static_cast<uint8_t>(v);
  }
}

// Q6_K high 2 bits of 32 levels -> h[2 k][16 r][4]: byte i bits 2c.. = bits 4,5 of level 16k+4c+i.
void put_h2(uint8_t* h, int r, const uint8_t* q) {
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < 4; ++i) {
      int v = 0;
      for (int c = 0; c < 4; ++c) v |= ((q[16 * k + 4 * c + i] >> 4) & 3) << (2 * c);
      h[(k * 16 + r) * 4 + i] = static_cast<uint8_t>(v);
    }
}

// 2-bit levels of 16 elements -> crumbs [16 r][4]: byte i bits 2c.. = bits 0,1 of level 4c+i.
void put_crumbs(uint8_t* l, int r, const uint8_t* q) {
  for (int i = 0; i < 4; ++i) {
    int v = 0;
    for (int c = 0; c < 4; ++c) v |= (q[4 * c + i] & 3) << (2 * c);
    l[r * 4 + i] = static_cast<uint8_t>(v);
  }
}

// Third bits of 32 levels -> [16 r][4]: byte i bit c = bit 2 of level 4c+i.
void put_bit2(uint8_t* h, int r, const uint8_t* q) {
  for (int i = 0; i < 4; ++i) {
    int v = 0;
    for (int c = 0; c < 8; ++c) v |= ((q[4 * c + i] >> 2) & 1) << c;
    h[r * 4 + i] = static_cast<uint8_t>(v);
  }
}

// Writes row r (0..15) of one group-block.
void put_row(int kind, uint8_t* gb, int r, const RowBlock& rb) {
  switch (kind) {
    case kPackQ8_0:
      put_f16(gb, r, rb.d);
      for (int c = 0; c < 8; ++c) std::memcpy(gb + 32 + (c * 16 + r) * 4, rb.q + 4 * c, 4);
      return;
    case kPackQ4_0:
    case kPackIQ4_NL:
      put_f16(gb, r, rb.d);
      put_nibbles(gb + 32, r, rb.q);
      return;
    case kPackQ4_1:
      put_f16(gb, r, rb.d);
      put_f16(gb + 32, r, rb.m);
      put_nibbles(gb + 64, r, rb.q);
      return;
    case kPackQ5_0:
      put_f16(gb, r, rb.d);
      put_hbits(gb + 32, r, rb.q);
      put_nibbles(gb + 96, r, rb.q);
      return;
    case kPackQ5_1:
      put_f16(gb, r, rb.d);
      put_f16(gb + 32, r, rb.m);
      put_hbits(gb + 64, r, rb.q);
      put_nibbles(gb + 128, r, rb.q);
      return;
    case kPackQ4_K:
    case kPackQ5_K:
      put_f16(gb, r, rb.d);
      put_f16(gb + 32, r, rb.m);
      for (int j = 0; j < 8; ++j) gb[64 + j * 16 + r] = rb.sc[j];
      for (int i = 0; i < 4; ++i) {
        gb[192 + (i * 16 + r) * 2] = rb.mins[2 * i];
        gb[192 + (i * 16 + r) * 2 + 1] = rb.mins[2 * i + 1];
      }
      for (int j = 0; j < 8; ++j) {
        const int sub = kind == kPackQ5_K ? 320 : 256;  // sub-block j's nibbles (+ Q5_K fifth bits)
        put_nibbles(gb + 320 + sub * j, r, rb.q + 32 * j);
        if (kind == kPackQ5_K) put_hbits(gb + 576 + 320 * j, r, rb.q + 32 * j);
      }
      return;
    case kPackQ6_K:
      put_f16(gb, r, rb.d);
      for (int j = 0; j < 16; ++j) gb[32 + j * 16 + r] = rb.sc[j];
      for (int s = 0; s < 8; ++s) {
        put_nibbles(gb + 288 + 384 * s, r, rb.q + 32 * s);
        put_h2(gb + 544 + 384 * s, r, rb.q + 32 * s);
      }
      return;
    case kPackMXFP4: {
      gb[r] = static_cast<uint8_t>(rb.d);  // the E8M0 byte; kernels make its half scale
      put_nibbles(gb + 16, r, rb.q);
      return;
    }
    case kPackIQ4_XS:
      put_f16(gb, r, rb.d);
      for (int j = 0; j < 8; ++j) gb[32 + j * 16 + r] = rb.sc[j];
      for (int j = 0; j < 8; ++j) put_nibbles(gb + 160 + 256 * j, r, rb.q + 32 * j);
      return;
    case kPackQ2_K:
      put_f16(gb, r, rb.d);
      put_f16(gb + 32, r, rb.m);
      for (int j = 0; j < 16; ++j) gb[64 + ((j / 2) * 16 + r) * 2 + j % 2] = rb.sc[j];
      for (int s = 0; s < 8; ++s)
        for (int k = 0; k < 2; ++k) put_crumbs(gb + 320 + 128 * s + 64 * k, r, rb.q + 32 * s + 16 * k);
      return;
    case kPackQ3_K:
      put_f16(gb, r, rb.d);
      for (int j = 0; j < 16; ++j) gb[32 + j * 16 + r] = rb.sc[j];
      for (int s = 0; s < 8; ++s) {
        for (int k = 0; k < 2; ++k) put_crumbs(gb + 288 + 192 * s + 64 * k, r, rb.q + 32 * s + 16 * k);
        put_bit2(gb + 288 + 192 * s + 128, r, rb.q + 32 * s);
      }
      return;
    default: TM_ASSERT(false, "put_row: bad kind");
  }
}

}  // namespace

int pack_kind_for(DType t, bool allow_bf16_copy) {
  switch (t) {
    case DType::Q8_0: return kPackQ8_0;
    case DType::Q4_0: return kPackQ4_0;
    case DType::Q4_1: return kPackQ4_1;
    case DType::Q5_0: return kPackQ5_0;
    case DType::Q5_1: return kPackQ5_1;
    case DType::Q4_K: return kPackQ4_K;
    case DType::Q5_K: return kPackQ5_K;
    case DType::Q6_K: return kPackQ6_K;
    case DType::Q2_K: return kPackQ2_K;
    case DType::Q3_K: return kPackQ3_K;
    case DType::IQ4_NL: return kPackIQ4_NL;
    case DType::IQ4_XS: return kPackIQ4_XS;
    case DType::MXFP4: return kPackMXFP4;
    case DType::F16: return allow_bf16_copy ? kPackBf16Copy : kPackNone;
    default: return kPackNone;
  }
}

int64_t pack_block_cols(int kind) {
  return (kind >= kPackQ4_K && kind <= kPackQ6_K) || kind == kPackIQ4_XS || kind == kPackQ2_K || kind == kPackQ3_K
             ? 256
             : 32;
}

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

// Bytes at the start of a 2 MiB aligned buffer advised to use huge pages: weights streamed from
// 4 KiB pages reach ~25 % less bandwidth per core (TLB misses; BM_Gemv/F16). The buffer is rounded
// up to whole huge pages when that wastes at most half its size (a 1.6 MiB matrix takes 2 MiB, a
// 4.6 MiB one 6 MiB); otherwise only its whole huge pages get them (2.4 MiB: 2 MiB) and smaller
// buffers none.
size_t huge_span(size_t bytes) {
  const size_t up = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (bytes > 0 && up - bytes <= bytes / 2) return up;
  return bytes / kHugePage * kHugePage;
}

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// `size` bytes at `align`, the first `advise` of them advised to use huge pages; not zeroed.
std::shared_ptr<void> raw_buffer(size_t align, size_t size, size_t advise) {
  void* p = nullptr;
  if (posix_memalign(&p, align, size) != 0) p = nullptr;
  TM_ASSERT(p != nullptr, "out of memory packing weights");
#ifdef MADV_HUGEPAGE
  if (advise > 0) madvise(p, advise, MADV_HUGEPAGE);
#endif
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}
}  // namespace

std::shared_ptr<void> aligned_buffer(size_t bytes) {
  const size_t span = huge_span(bytes);
  const size_t size = std::max(round64(std::max<size_t>(bytes, 1)), span);
  auto buf = raw_buffer(span > 0 ? kHugePage : 64, size, span);
  std::memset(buf.get(), 0, size);
  return buf;
}

namespace {
// Weight buffers below kSlabBytes are carved out of shared 32 MiB slabs on huge pages, one after
// the other, so a model's small matrices (Q8_0 wq/wo: 0.85 MiB) and the tails of medium ones are
// on huge pages too, with no rounding waste: only the slab's last, partly used huge page is
// resident beyond what is asked. A slab is freed with its last piece (aliasing shared_ptr).
constexpr size_t kSlabBytes = size_t{32} << 20;
constexpr size_t kSlabMinBytes = size_t{64} << 10;  // below: plain aligned_buffer (tiny models, tests)

struct SlabAllocator {
  std::mutex mu;
  std::shared_ptr<void> slab;  // the slab being filled
  size_t used = kSlabBytes;

  std::shared_ptr<void> take(size_t bytes) {
    const size_t need = round64(bytes);
    std::shared_ptr<void> piece;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (kSlabBytes - used < need) {
        slab = raw_buffer(kHugePage, kSlabBytes, kSlabBytes);  // pages fault in as pieces are zeroed
        used = 0;
      }
      piece = std::shared_ptr<void>(slab, static_cast<uint8_t*>(slab.get()) + used);
      used += need;
    }
    std::memset(piece.get(), 0, need);
    return piece;
  }
};

SlabAllocator& slab_allocator() {
  static SlabAllocator slabs;
  return slabs;
}
}  // namespace

std::shared_ptr<void> weight_buffer(size_t bytes) {
  if (bytes < kSlabMinBytes || bytes >= kSlabBytes) return aligned_buffer(bytes);
  return slab_allocator().take(bytes);
}

void end_weight_slab() {
  SlabAllocator& a = slab_allocator();
  std::shared_ptr<void> old;  // freed outside the lock (when no piece holds it, nothing does)
  std::lock_guard<std::mutex> lock(a.mu);
  old = std::move(a.slab);
  a.used = kSlabBytes;
}

std::shared_ptr<void> resident_copy(const Matrix& m) {
  const size_t bytes = m.bytes();
  if (bytes < kSlabMinBytes) return nullptr;
  auto buf = weight_buffer(bytes);
  std::memcpy(buf.get(), m.data, bytes);
  return buf;
}

std::shared_ptr<void> pack_weights(const Matrix& m, int kind, size_t* bytes) {
  *bytes = 0;
  if (kind == kPackNone) return nullptr;
  if (kind == kPackBf16Copy) {
    // x16 layout: group g (16 rows), column pair p -> 64 bytes at (g * ncp + p) * 64 holding
    // [16 rows][2 bf16]; rows past the end and the column past an odd width are zero.
    const int64_t ncp = bf16_x16_pairs(m.cols), groups = (m.rows + kRows - 1) / kRows;
    *bytes = static_cast<size_t>(groups * ncp) * 64;
    auto buf = weight_buffer(*bytes);
    auto* dst = static_cast<uint16_t*>(buf.get());
    const uint16_t* bf = f16_to_bf16_table();
    for (int64_t r = 0; r < m.rows; ++r) {
      const uint8_t* src = m.row(r);
      uint16_t* gdst = dst + (r / kRows) * ncp * 32 + (r % kRows) * 2;
      int64_t c = 0;
      for (; c + 2 <= m.cols; c += 2) {  // one column pair: 4 bytes in, 4 bytes out
        uint16_t h[2];
        std::memcpy(h, src + 2 * c, 4);
        const uint32_t pair = bf[h[0]] | static_cast<uint32_t>(bf[h[1]]) << 16;
        std::memcpy(gdst + (c / 2) * 32, &pair, 4);
      }
      if (c < m.cols) {
        uint16_t h;
        std::memcpy(&h, src + 2 * c, 2);
        gdst[(c / 2) * 32] = bf[h];
      }
    }
    return buf;
  }
  const int64_t bcols = pack_block_cols(kind);
  TM_ASSERT(m.cols % bcols == 0, "pack_weights: columns not a multiple of the block size");
  const int64_t nb = m.cols / bcols;
  const int64_t groups = (m.rows + kRows - 1) / kRows;
  const size_t gbb = static_cast<size_t>(kGroupBlockBytes[kind]);
  const size_t src_block = m.row_bytes / static_cast<size_t>(nb);
  *bytes = static_cast<size_t>(groups * nb) * gbb;
  auto buf = weight_buffer(*bytes);
  auto* out = static_cast<uint8_t*>(buf.get());
  RowBlock rb;
  for (int64_t g = 0; g < groups; ++g) {
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = g * kRows + r;
      if (row >= m.rows) break;  // padding rows stay zero: scale 0 contributes nothing
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* src = m.row(row) + static_cast<size_t>(b) * src_block;
        if (bcols == 32) decode_legacy(kind, src, &rb);
        else decode_kquant(kind, src, &rb);
        put_row(kind, out + static_cast<size_t>(g * nb + b) * gbb, r, rb);
      }
    }
  }
  return buf;
}

}  // namespace tmill::kern
