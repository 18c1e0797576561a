// The engines the server tests attach: stories260K (the shipped tiny Llama) with the few settings a
// test varies, created with a test failure (not a crash) when the engine cannot be made.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "engine/engine.h"
#include "test_support.h"

namespace tmill::test {

inline std::string stories_model() { return source_path("models/stories260K/stories260K.gguf"); }

inline EngineConfig stories_config(int threads = 1, int max_num_seqs = 8) {
  EngineConfig c;
  c.model_path = stories_model();
  c.threads = threads;
  c.max_num_seqs = max_num_seqs;
  return c;
}

// Null (and a failed expectation) when the engine cannot be created.
inline std::unique_ptr<Engine> make_engine(const EngineConfig& c) {
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? std::move(e).value() : nullptr;
}

inline std::unique_ptr<Engine> stories_engine(int threads = 1, int max_num_seqs = 8) {
  return make_engine(stories_config(threads, max_num_seqs));
}

}  // namespace tmill::test
