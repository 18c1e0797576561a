// Models the eval tests run on: the bundled stories260K, tiny random models of real families, their
// quantizations (through the real quantizer), and an "outlier" variant whose norm weights blow up a
// few channels (real LLMs have such channels; random models do not), made by rewriting the GGUF.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "convert/dummy.h"
#include "convert/model_quantizer.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "test_support.h"

namespace tmill::test {

inline std::string stories_path() { return source_path("models/stories260K/stories260K.gguf"); }
inline std::string story_text_path() { return source_path("tests/data/eval/story.txt"); }

// A random F32 model of a known or custom shape, cached per name for the test process.
inline std::string dummy_model(const ModelShape& shape, uint64_t seed = 5) {
  static std::map<std::string, std::string> cache;
  const std::string key = shape.name + "-" + std::to_string(seed);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  DummyOptions o;
  o.shape = shape;
  o.dtype = DType::F32;
  o.seed = seed;
  o.threads = 2;
  const std::string path = temp_dir() + "/" + key + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return cache[key] = path;
}

inline std::string dummy_model(const std::string& shape_name) { return dummy_model(*find_shape(shape_name)); }

// A 256-wide qwen2-family shape: K-quants (256-column super-blocks) apply to every matrix.
inline ModelShape shape_256() {
  ModelShape s{"eval-qwen2-256", "qwen2", 512, 256, 2, 4, 2, 64, 512, 512, 1000000.0f, 1e-6f, true};
  return s;
}

// `type` through tokenmill's quantizer (pure: every matrix gets the type), optionally with an imatrix.
inline std::string quantized(const std::string& in, const std::string& type, const std::string& imatrix = "",
                             bool pure = true) {
  const std::string out = temp_dir() + "/" + std::to_string(std::hash<std::string>{}(in + type + imatrix)) + "-" +
                          type + ".gguf";
  QuantizeModelOptions q;
  q.input = in;
  q.output = out;
  auto r = recipe_from_name(type);
  EXPECT_TRUE(r.ok()) << r.error();
  q.recipe = *r;
  q.plan.pure = pure;
  q.imatrix_path = imatrix;
  q.threads = 2;
  auto rep = quantize_model(q);
  EXPECT_TRUE(rep.ok()) << rep.error();
  return out;
}

// Copy of a GGUF whose attn_norm / ffn_norm weights are multiplied by `factor` on `channels`: the
// inputs of Q/K/V and gate/up then carry a few strong columns, like real models' outlier features.
inline std::string outlier_model(const std::string& in, const std::vector<int>& channels, float factor) {
  const std::string out = in + ".outliers.gguf";
  auto f = GgufFile::open(in);
  EXPECT_TRUE(f.ok()) << f.error();
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  for (const GgufTensorInfo& t : f->tensors()) {
    const bool norm = t.name.find("attn_norm") != std::string::npos || t.name.find("ffn_norm") != std::string::npos;
    const GgufTensorInfo* tp = &t;
    auto st = w.add_tensor(t.name, t.type, t.ne, [tp, norm, channels, factor](uint8_t* dst, size_t n) -> Status {
      std::memcpy(dst, tp->data, n);
      if (norm) {
        float* x = reinterpret_cast<float*>(dst);
        for (int c : channels) x[c] *= factor;
      }
      return Status{};
    });
    EXPECT_TRUE(st.ok()) << st.error();
  }
  auto st = w.write(out);
  EXPECT_TRUE(st.ok()) << st.error();
  return out;
}

}  // namespace tmill::test
