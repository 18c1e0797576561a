#include "convert/hf_packed.h"

#include <cstring>

#include <fmt/format.h>

#include "convert/hf_model.h"
#include "convert/hf_tensor_ops.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace tmill {
namespace {

using Packed = HfConfig::Packed;

// AutoAWQ packs outputs 0 2 4 6 1 3 5 7 into a word's nibbles 0..7: output j sits in nibble kAwqNibble[j].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string where_of(const SafetensorsModel::Ref& r) { return fmt::format("{}: tensor '{}'", r.file->path(), r.tensor->name); }

bool is_int(StDType t) { return t == StDType::I32 || t == StDType::I64; }

// Element i of an integer tensor (I32 or I64; checked by open_packed), or a packed word's bits.
int64_t int_at(const SafetensorsTensor& t, int64_t i) {
  if (t.dtype == StDType::I64) {
    int64_t v;
    std::memcpy(&v, t.data + i * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}
uint32_t word_at(const SafetensorsTensor& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

// A part's dtype (I32 words, or float scales) and shape, for a weight of rows x cols.
Status expect(const SafetensorsModel::Ref& r, const std::vector<int64_t>& shape, bool integer, const char* what,
              int64_t rows, int64_t cols) {
  if (integer ? r.tensor->dtype != StDType::I32 : !st_dtype_is_float(r.tensor->dtype))
    return Error{fmt::format("{}: {} must be {}, not {}", where_of(r), what, integer ? "I32" : "F16, BF16 or F32",
                             st_dtype_name(r.tensor->dtype))};
  if (r.tensor->shape != shape)
    return Error{fmt::format("{}: {} of shape {}, expected {} for a weight of {} x {}", where_of(r), what,
                             shape_str(r.tensor->shape), shape_str(shape), rows, cols)};
  return {};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::optional<std::pair<std::string, PackedPart>> packed_part(const std::string& name, Packed format) {
  using P = PackedPart;
  static const std::pair<const char*, P> kGptq[] = {
      {".qweight", P::Weight}, {".qzeros", P::Zeros}, {".scales", P::Scales}, {".g_idx", P::GIdx}};
  static const std::pair<const char*, P> kCt[] = {{".weight_packed", P::Weight},
                                                  {".weight_zero_point", P::Zeros},
                                                  {".weight_scale", P::Scales},
                                                  {".weight_g_idx", P::GIdx},
                                                  {".weight_shape", P::Shape}};
  if (format == Packed::None) return std::nullopt;
  auto match = [&](const auto& table) -> std::optional<std::pair<std::string, PackedPart>> {
    for (const auto& [suffix, part] : table)
      if (name.ends_with(suffix)) return std::pair{name.substr(0, name.size() - std::strlen(suffix)), part};
    return std::nullopt;
  };
  return format == Packed::CompressedTensors ? match(kCt) : match(kGptq);
}

Result<PackedMatrix> open_packed(const SafetensorsModel& w, const HfConfig& c, const std::string& base, int64_t rows,
                                 int64_t cols) {
  PackedMatrix m;
  m.format = c.packed;
  m.bits = c.packed_bits;
  m.group = c.packed_group;
  m.zero_minus_one = c.packed == Packed::Gptq && c.gptq_zero_minus_one;
  m.rows = rows;
  m.cols = cols;
  const bool ct = c.packed == Packed::CompressedTensors;
  auto part = [&](const char* gptq, const char* ctname) { return w.find(base + (ct ? ctname : gptq)); };
  const auto weight = part(".qweight", ".weight_packed");
  if (!weight) return Error{fmt::format("{}: no packed weight '{}{}'", w.files().front()->path(), base, ct ? ".weight_packed" : ".qweight")};
  m.weight = *weight;
  m.where = where_of(m.weight);
  const auto scales = part(".scales", ".weight_scale");
  if (!scales) return Error{fmt::format("{}: packed weights without their scales ('{}{}')", m.where, base, ct ? ".weight_scale" : ".scales")};
  m.scales = *scales;
  m.zeros = part(".qzeros", ".weight_zero_point");
  m.g_idx = part(".g_idx", ".weight_g_idx");
  if (ct) m.shape = part("", ".weight_shape");

  const int64_t P = 32 / m.bits;  // values per word
  if (m.group > 0 && c.packed != Packed::CompressedTensors && cols % m.group != 0)
    return Error{fmt::format("{}: group_size {} does not divide the {} input columns", m.where, m.group, cols)};
  const int64_t G = m.group > 0 ? ceil_div(cols, m.group) : 1;
  switch (c.packed) {
    case Packed::Gptq:
      if (cols % P != 0 || rows % P != 0)
        return Error{fmt::format("{}: a {} x {} weight cannot be packed {} values to a word", m.where, rows, cols, P)};
      TM_TRY(expect(m.weight, {cols / P, rows}, true, "qweight", rows, cols));
      if (!m.zeros) return Error{fmt::format("{}: GPTQ weights without their '{}.qzeros'", m.where, base)};
      TM_TRY(expect(*m.zeros, {G, rows / P}, true, "qzeros", rows, cols));
      TM_TRY(expect(m.scales, {G, rows}, false, "scales", rows, cols));
      break;
    case Packed::Awq:
      if (rows % 8 != 0) return Error{fmt::format("{}: {} output rows cannot be packed 8 to a word", m.where, rows)};
      TM_TRY(expect(m.weight, {cols, rows / 8}, true, "qweight", rows, cols));
      if (m.zeros) TM_TRY(expect(*m.zeros, {G, rows / 8}, true, "qzeros", rows, cols));
      TM_TRY(expect(m.scales, {G, rows}, false, "scales", rows, cols));
      break;
    case Packed::CompressedTensors: {
      TM_TRY(expect(m.weight, {rows, ceil_div(cols, P)}, true, "weight_packed", rows, cols));
      if (m.zeros) TM_TRY(expect(*m.zeros, {ceil_div(rows, P), G}, true, "weight_zero_point", rows, cols));
      TM_TRY(expect(m.scales, {rows, G}, false, "weight_scale", rows, cols));
      if (m.shape) {
        const SafetensorsTensor& t = *m.shape->tensor;
        if (!is_int(t.dtype) || t.n_elements != 2 || int_at(t, 0) != rows || int_at(t, 1) != cols)
          return Error{fmt::format("{}: weight_shape does not say {} x {}", where_of(*m.shape), rows, cols)};
      }
      break;
    }
    case Packed::None:
      return Error{"internal: open_packed without a packed format"};
  }
  if (m.g_idx) {
    const SafetensorsTensor& t = *m.g_idx->tensor;
    if (!is_int(t.dtype) || t.shape != std::vector<int64_t>{cols})
      return Error{fmt::format("{}: g_idx must be {} integers (I32 or I64), not {} {}", where_of(*m.g_idx), cols,
                               st_dtype_name(t.dtype), shape_str(t.shape))};
  }
  return m;
}

Result<PackedGroups> read_packed_groups(const PackedMatrix& m) {
  PackedGroups g;
  const int64_t R = m.rows, C = m.cols, P = 32 / m.bits;
  const bool ct = m.format == Packed::CompressedTensors;
  g.groups = ct ? m.scales.tensor->shape[1] : m.scales.tensor->shape[0];
  const int64_t G = g.groups;
  std::vector<float> s(static_cast<size_t>(R * G));
  TM_TRY(m.scales.file->read_f32(*m.scales.tensor, s.data()));
  g.scale.resize(s.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < G; ++k) g.scale[r * G + k] = ct ? s[r * G + k] : s[k * R + r];
  const uint32_t mask = (1u << m.bits) - 1;
  g.zero.assign(static_cast<size_t>(R * G), 1 << (m.bits - 1));
  if (m.zeros) {
    const SafetensorsTensor& z = *m.zeros->tensor;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < G; ++k) {
        int32_t v = 0;
        if (m.format == Packed::Gptq) v = static_cast<int32_t>((word_at(z, k * (R / P) + r / P) >> (m.bits * (r % P))) & mask);
        else if (m.format == Packed::Awq) v = static_cast<int32_t>((word_at(z, k * (R / 8) + r / 8) >> (4 * kAwqNibble[r % 8])) & 0xF);
        else v = static_cast<int32_t>((word_at(z, (r / P) * G + k) >> (m.bits * (r % P))) & mask);
        g.zero[r * G + k] = v + (m.zero_minus_one ? 1 : 0);
      }
  }
  g.group_of.resize(static_cast<size_t>(C));
  for (int64_t k = 0; k < C; ++k) {
    const int64_t v = m.g_idx ? int_at(*m.g_idx->tensor, k) : m.group > 0 ? k / m.group : 0;
    if (v < 0 || v >= G)
      return Error{fmt::format("{}: column {} is in group {}, of {} groups", m.g_idx ? where_of(*m.g_idx) : m.where, k, v, G)};
    g.group_of[k] = static_cast<int32_t>(v);
  }
  return g;
}

std::vector<uint8_t> read_packed_values(const PackedMatrix& m) {
  const int64_t R = m.rows, C = m.cols, P = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1;
  const SafetensorsTensor& w = *m.weight.tensor;
  std::vector<uint8_t> q(static_cast<size_t>(R * C));
  switch (m.format) {
    case Packed::Gptq:  // [C / P, R]: word (kw, r) holds columns kw * P .. kw * P + P - 1 of row r
      for (int64_t kw = 0; kw < C / P; ++kw)
        for (int64_t r = 0; r < R; ++r) {
          const uint32_t word = word_at(w, kw * R + r);
          for (int64_t i = 0; i < P; ++i) q[r * C + kw * P + i] = static_cast<uint8_t>((word >> (m.bits * i)) & mask);
        }
      break;
    case Packed::Awq:  // [C, R / 8]: word (k, rw) holds rows rw * 8 .. rw * 8 + 7 of column k
      for (int64_t k = 0; k < C; ++k)
        for (int64_t rw = 0; rw < R / 8; ++rw) {
          const uint32_t word = word_at(w, k * (R / 8) + rw);
          for (int j = 0; j < 8; ++j) q[(rw * 8 + j) * C + k] = static_cast<uint8_t>((word >> (4 * kAwqNibble[j])) & 0xF);
        }
      break;
    case Packed::CompressedTensors: {  // [R, ceil(C / P)]: along each row
      const int64_t W = (C + P - 1) / P;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t kw = 0; kw < W; ++kw) {
          const uint32_t word = word_at(w, r * W + kw);
          for (int64_t i = 0; i < P && kw * P + i < C; ++i)
            q[r * C + kw * P + i] = static_cast<uint8_t>((word >> (m.bits * i)) & mask);
        }
      break;
    }
    case Packed::None:
      break;
  }
  return q;
}

Result<std::optional<DType>> packed_block_type(const PackedMatrix& m) {
  if (m.bits != 4 || m.cols % 32 != 0) return std::optional<DType>{};
  TM_ASSIGN_OR_RETURN(const PackedGroups g, read_packed_groups(m));
  for (int64_t b = 0; b < m.cols; b += 32)
    for (int64_t k = b + 1; k < b + 32; ++k)
      if (g.group_of[k] != g.group_of[b]) return std::optional<DType>{};  // act-order: a block spans groups
  bool sym = true;
  for (size_t i = 0; i < g.scale.size(); ++i) {
    if (fp16_to_fp32(fp32_to_fp16(g.scale[i])) != g.scale[i]) return std::optional<DType>{};  // fp16 cannot hold it
    sym = sym && g.zero[i] == 8;
  }
  return std::optional<DType>{sym ? DType::Q4_0 : DType::Q4_1};
}

Status write_packed(const PackedMatrix& m, DType out, int64_t permute_head_dim, uint8_t* dst, size_t nbytes) {
  const int64_t R = m.rows, C = m.cols;
  const auto row_bytes = dtype_row_bytes(out, C);
  if (!row_bytes || nbytes != static_cast<size_t>(R) * *row_bytes) return Error{"internal: packed tensor size mismatch"};
  TM_ASSIGN_OR_RETURN(const PackedGroups g, read_packed_groups(m));
  const std::vector<uint8_t> q = read_packed_values(m);
  const int64_t G = g.groups;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t sr = permute_head_dim ? llama_qk_permuted_source_row(r, permute_head_dim) : r;
    const uint8_t* qr = q.data() + sr * C;
    uint8_t* d = dst + static_cast<size_t>(r) * *row_bytes;
    if (out == DType::Q4_0 || out == DType::Q4_1) {
      for (int64_t b = 0; b < C / 32; ++b) {
        const int64_t grp = sr * G + g.group_of[b * 32];
        uint8_t qs[16];
        for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(qr[b * 32 + j] | (qr[b * 32 + j + 16] << 4));
        if (out == DType::Q4_0) {
          BlockQ4_0 blk{fp32_to_fp16(g.scale[grp]), {}};
          std::memcpy(blk.qs, qs, 16);
          std::memcpy(d + b * sizeof(blk), &blk, sizeof(blk));
        } else {
          BlockQ4_1 blk{fp32_to_fp16(g.scale[grp]), fp32_to_fp16(-g.scale[grp] * static_cast<float>(g.zero[grp])), {}};
          std::memcpy(blk.qs, qs, 16);
          std::memcpy(d + b * sizeof(blk), &blk, sizeof(blk));
        }
      }
      continue;
    }
    for (int64_t k = 0; k < C; ++k) {
      const int64_t grp = sr * G + g.group_of[k];
      const float v = g.scale[grp] * static_cast<float>(static_cast<int32_t>(qr[k]) - g.zero[grp]);
      if (out == DType::F32) {
        std::memcpy(d + k * 4, &v, 4);
      } else if (out == DType::F16 || out == DType::BF16) {
        const uint16_t h = out == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        std::memcpy(d + k * 2, &h, 2);
      } else {
        return Error{fmt::format("internal: packed weights written as {}", dtype_name(out))};
      }
    }
  }
  return {};
}

}  // namespace tmill
