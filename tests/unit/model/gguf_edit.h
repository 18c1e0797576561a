// Model tests' edited copies of a GGUF file: its metadata with some keys changed and some tensors
// left out, loaded as a model (a family reader's refusals and options on otherwise valid files).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "model/model.h"

namespace tmill::test {

inline Result<std::shared_ptr<Model>> load_edited(const std::string& src, const std::function<void(GgufWriter&)>& edit_kv,
                                                  const std::function<bool(const std::string&)>& drop = nullptr) {
  auto f = GgufFile::open(src);
  EXPECT_TRUE(f.ok());
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  edit_kv(w);
  for (const auto& t : f->tensors())
    if (!drop || !drop(t.name)) {
      EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data).ok());
    }
  static int n = 0;
  const std::string out = src + ".edited" + std::to_string(n++) + ".gguf";
  EXPECT_TRUE(w.write(out).ok());
  return Model::load(out);
}

}  // namespace tmill::test
