// The convert tests' round trip: a tiny `tokenmill dummy` model (F32) written back as a Hugging Face
// folder must convert to the same model -- the same tensors byte for byte, the same hyper-parameters,
// the same logits. Helpers shared by the family tests (hf_gemma_test.cpp, hf_families_test.cpp,
// hf_gptoss_test.cpp).
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert/dummy.h"
#include "convert/hf_model.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "model/model.h"
#include "model/reference.h"

namespace tmill::test {

struct DummyFile {
  ModelShape shape;
  std::string path;
};

// The known shape `shape` written as an F32 dummy (weights of standard deviation 0.1, seed `seed`).
inline DummyFile write_f32_dummy(const std::string& shape, uint64_t seed) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = DType::F32;
  o.std = 0.1f;
  o.seed = seed;
  DummyFile d{o.shape, temp_dir() + "/" + shape + ".gguf"};
  auto st = write_dummy_model(o, d.path);
  EXPECT_TRUE(st.ok()) << st.error();
  return d;
}

inline std::vector<float> f32_values_of(const GgufTensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

// Converts a folder that must convert (into `*path` when given).
inline GgufFile convert_ok(const std::string& dir, std::string* path = nullptr) {
  const std::string out = temp_dir() + "/converted.gguf";
  if (path) *path = out;
  auto st = convert_hf_to_gguf(dir, out, HfConvertOptions{});
  EXPECT_TRUE(st.ok()) << st.error();
  auto f = GgufFile::open(out);
  EXPECT_TRUE(f.ok()) << f.error();
  return std::move(f).value();
}

// The refusal of a folder that must not convert ("<converted OK>" when it does).
inline std::string convert_error(const nlohmann::json& cfg, const HfTensors& t) {
  auto st = convert_hf_to_gguf(write_hf_folder(cfg, t, "F32", false, "bad"), temp_dir() + "/bad.gguf", HfConvertOptions{});
  return st.ok() ? "<converted OK>" : st.error();
}

// Every tensor of `want` in `got` with the same type, shape and bytes (from `alt` for those it has and
// `use_alt` says: gpt-oss's MXFP4 experts).
inline void expect_same_tensors(const GgufFile& got, const GgufFile& want, const GgufFile* alt = nullptr,
                                const std::function<bool(const std::string&)>& use_alt = nullptr) {
  EXPECT_EQ(got.tensors().size(), want.tensors().size());
  for (const GgufTensorInfo& w0 : want.tensors()) {
    const GgufTensorInfo& w = alt && use_alt(w0.name) ? *alt->find_tensor(w0.name) : w0;
    const GgufTensorInfo* g = got.find_tensor(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->type, w.type) << w.name;
    EXPECT_EQ(g->ne, w.ne) << w.name;
    ASSERT_EQ(g->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(std::memcmp(g->data, w.data, w.nbytes), 0) << w.name;
  }
}

// Every `<arch>.` key of `want`, the same value in `got`; returns how many there were.
inline int expect_same_arch_keys(const GgufFile& got, const GgufFile& want, const std::string& arch) {
  const std::string a = arch + ".";
  int n = 0;
  for (const auto& [key, v] : want.metadata()) {
    if (key.rfind(a, 0) != 0) continue;
    ++n;
    EXPECT_NE(got.find(key), nullptr) << key;
    EXPECT_EQ(got.get_number(key), want.get_number(key)) << key;
    EXPECT_EQ(got.get_string(key), want.get_string(key)) << key;
  }
  return n;
}

// The two model files compute the same logits, position after position, each feeding its greedy token.
inline void expect_same_logits(const std::string& want_path, const std::string& got_path, int positions = 12) {
  auto m1 = Model::load(want_path);
  ASSERT_TRUE(m1.ok()) << m1.error();
  auto m2 = Model::load(got_path);
  ASSERT_TRUE(m2.ok()) << m2.error();
  ReferenceForward r1(*m1, 16), r2(*m2, 16);
  int32_t tok = 1;
  for (int pos = 0; pos < positions; ++pos) {
    const std::vector<float> a1 = r1.forward(tok, pos);
    const std::vector<float>& a2 = r2.forward(tok, pos);
    ASSERT_EQ(a1, a2) << "position " << pos;
    tok = static_cast<int32_t>(std::max_element(a1.begin(), a1.end()) - a1.begin());
  }
}

}  // namespace tmill::test
