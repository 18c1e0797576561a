// Builds safetensors files and tiny Hugging Face model folders for the tests (written by hand here,
// so the reader is checked against the format, not against itself).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fp16.h"

namespace tmill::test {

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I32", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// header length u64 | JSON header | data
inline std::vector<uint8_t> raw_safetensors(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

// Tensors laid out back to back in the given order; the header is padded with spaces to a multiple of 8
// as the reference writer does.
inline std::vector<uint8_t> build_safetensors(const std::vector<StTensor>& ts,
                                              const std::vector<std::pair<std::string, std::string>>& meta = {}) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!meta.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (auto& [k, v] : meta) m[k] = v;
    h["__metadata__"] = m;
  }
  std::vector<uint8_t> data;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  return raw_safetensors(header, data);
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline std::vector<uint8_t> encode_floats(const std::vector<float>& v, const std::string& dtype) {
  std::vector<uint8_t> out;
  for (float x : v) {
    if (dtype == "F32") {
      uint8_t b[4];
      std::memcpy(b, &x, 4);
      out.insert(out.end(), b, b + 4);
    } else {
      const uint16_t h = dtype == "F16" ? fp32_to_fp16(x) : fp32_to_bf16(x);
      out.push_back(static_cast<uint8_t>(h & 0xff));
      out.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  return out;
}

// Values exactly representable in BF16 and F16 (multiples of 1/64 in [-2, 2)), so every dtype
// round trip is exact and the expected GGUF contents can be computed without rounding questions.
inline std::vector<float> exact_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 256) - 128) / 64.0f;
  return v;
}

}  // namespace tmill::test
