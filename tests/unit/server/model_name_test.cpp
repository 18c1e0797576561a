// The name a model is served under by default: a file's name without .gguf, a split GGUF's without
// its shard suffix, a Hugging Face folder's name (also when given with a trailing slash).
#include <gtest/gtest.h>

#include "server/server.h"

using tmill::server::default_model_name;

TEST(DefaultModelName, FilesFoldersAndShards) {
  EXPECT_EQ(default_model_name("/m/qwen2.5-0.5b-q8_0.gguf"), "qwen2.5-0.5b-q8_0");
  EXPECT_EQ(default_model_name("/models/Qwen2.5-7B-Instruct"), "Qwen2.5-7B-Instruct");
  EXPECT_EQ(default_model_name("/models/Qwen2.5-7B-Instruct/"), "Qwen2.5-7B-Instruct");
  EXPECT_EQ(default_model_name("/m/llama-70b-q4_k_m-00001-of-00005.gguf"), "llama-70b-q4_k_m");
  EXPECT_EQ(default_model_name("/m/x-0001-of-00005.gguf"), "x-0001-of-00005");  // not a shard name
  EXPECT_EQ(default_model_name("/m/x-00001-of-0000a.gguf"), "x-00001-of-0000a");
  EXPECT_EQ(default_model_name("stories260K.gguf"), "stories260K");
  EXPECT_EQ(default_model_name(""), "model");
}
