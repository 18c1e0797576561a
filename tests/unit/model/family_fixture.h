// The family tests' fixtures (classic_families_test, gemma4_test, deci_test): a tiny dummy of a known
// shape written to the test's temp folder and loaded (F32, seed 7), and the reference logits at the last
// of a few positions of a fixed token sequence, with the model's config or weights edited first.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert/dummy.h"
#include "model/model.h"
#include "model/reference.h"
#include "test_support.h"

namespace tmill::test {

inline std::string family_file(const std::string& shape) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.seed = 7;
  o.dtype = DType::F32;
  const std::string path = temp_dir() + "/family-" + shape + ".gguf";
  EXPECT_TRUE(write_dummy_model(o, path).ok());
  return path;
}

inline std::shared_ptr<Model> family_model(const std::string& shape) {
  auto m = Model::load(family_file(shape));
  EXPECT_TRUE(m.ok()) << m.error();
  return m.ok() ? *m : nullptr;
}

// The logits at position n_positions - 1 (tokens p * 31 + 2), the model edited by `edit` (may be null).
inline std::vector<float> family_logits(const std::shared_ptr<Model>& m, int64_t n_positions,
                                        const std::function<void(ModelConfig&, ModelWeights&)>& edit = nullptr) {
  auto copy = std::make_shared<Model>(*m);
  if (edit) edit(const_cast<ModelConfig&>(copy->config()), const_cast<ModelWeights&>(copy->weights()));
  ReferenceForward ref(copy, n_positions + 2);
  std::vector<float> out;
  for (int64_t p = 0; p < n_positions; ++p) out = ref.forward(static_cast<int32_t>(p * 31 + 2), p);
  return out;
}

}  // namespace tmill::test
