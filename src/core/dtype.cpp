#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/log.h"

namespace tmill {
namespace {
constexpr DTypeInfo kInfos[] = {
    {DType::F32, "F32", 1, 4, false},        {DType::F16, "F16", 1, 2, false},
    {DType::Q4_0, "Q4_0", 32, 18, true},     {DType::Q4_1, "Q4_1", 32, 20, true},
    {DType::Q5_0, "Q5_0", 32, 22, true},     {DType::Q5_1, "Q5_1", 32, 24, true},
    {DType::Q8_0, "Q8_0", 32, 34, true},     {DType::Q8_1, "Q8_1", 32, 36, true},
    {DType::Q2_K, "Q2_K", 256, 84, true},    {DType::Q3_K, "Q3_K", 256, 110, true},
    {DType::Q4_K, "Q4_K", 256, 144, true},   {DType::Q5_K, "Q5_K", 256, 176, true},
    {DType::Q6_K, "Q6_K", 256, 210, true},   {DType::Q8_K, "Q8_K", 256, 292, true},
    {DType::IQ2_XXS, "IQ2_XXS", 256, 66, true}, {DType::IQ2_XS, "IQ2_XS", 256, 74, true},
    {DType::IQ3_XXS, "IQ3_XXS", 256, 98, true}, {DType::IQ1_S, "IQ1_S", 256, 50, true},
    {DType::IQ4_NL, "IQ4_NL", 32, 18, true}, {DType::IQ3_S, "IQ3_S", 256, 110, true},
    {DType::IQ2_S, "IQ2_S", 256, 82, true},  {DType::IQ4_XS, "IQ4_XS", 256, 136, true},
    {DType::I8, "I8", 1, 1, false},          {DType::I16, "I16", 1, 2, false},
    {DType::I32, "I32", 1, 4, false},        {DType::I64, "I64", 1, 8, false},
    {DType::F64, "F64", 1, 8, false},        {DType::IQ1_M, "IQ1_M", 256, 56, true},
    {DType::BF16, "BF16", 1, 2, false},      {DType::TQ1_0, "TQ1_0", 256, 54, true},
    {DType::TQ2_0, "TQ2_0", 256, 66, true},  {DType::MXFP4, "MXFP4", 32, 17, true},
};
constexpr uint32_t kMaxId = 40;
constexpr DTypeInfo kKvOnly[] = {{DType::F8_E4M3, "F8_E4M3", 1, 1, false}, {DType::F8_E5M2, "F8_E5M2", 1, 1, false}};

const std::array<const DTypeInfo*, kMaxId>& table() {
  static const auto t = [] {
    std::array<const DTypeInfo*, kMaxId> a{};
    for (const auto& i : kInfos) a[static_cast<uint32_t>(i.type)] = &i;
    return a;
  }();
  return t;
}
}  // namespace

const DTypeInfo* dtype_info(uint32_t id) { return id < kMaxId ? table()[id] : nullptr; }

const DTypeInfo& dtype_info(DType t) {
  for (const auto& k : kKvOnly)
    if (k.type == t) return k;
  const DTypeInfo* i = dtype_info(static_cast<uint32_t>(t));
  TM_ASSERT(i != nullptr, "unknown dtype");
  return *i;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfos) {
    std::string_view n = i.name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t k = 0; k < n.size() && eq; ++k)
      eq = std::toupper(static_cast<unsigned char>(name[k])) == n[k];
    if (eq) return i.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n) {
  const DTypeInfo& i = dtype_info(t);
  const auto bs = static_cast<uint64_t>(i.block_size);
  if (n % bs != 0) return std::nullopt;
  uint64_t blocks = n / bs, out = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(i.type_size), &out)) return std::nullopt;
  return out;
}

}  // namespace tmill
