// llama2.c checkpoint + tokenizer.bin -> GGUF: the converter reproduces the bundled stories260K
// model byte for byte.
#include <gtest/gtest.h>

#include <fstream>

#include "convert/llama2c.h"
#include "test_support.h"

using namespace tmill;

// The converter output is byte-identical to the bundled default model.
TEST(Stories260K, ConverterReproducesBundledModel) {
  std::string out = test::temp_dir() + "/stories.gguf";
  Llama2cConvertOptions opts;
  opts.name = "stories260K";
  ASSERT_TRUE(convert_llama2c_to_gguf(test::source_path("tests/data/stories260K/stories260K.bin"),
                                      test::source_path("tests/data/stories260K/tok512.bin"), out, opts)
                  .ok());
  std::ifstream a(out, std::ios::binary), b(test::source_path("models/stories260K/stories260K.gguf"), std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(sa.size(), sb.size());
  EXPECT_TRUE(sa == sb);
}
