// Complete HF folder -> GGUF conversion (weights + tokenizer): a tiny Qwen3-shaped model with the real
// Qwen3 tokenizer.json must give a GGUF whose tokenizer encodes like the folder, whose vocabulary is
// padded to vocab_size like llama.cpp's converter, and whose hyper-parameters the model layer accepts.
// Also drives `tokenmill convert` on the folder.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "convert/hf_convert.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "model/config.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

json tiny_qwen3(int64_t vocab) {
  return {{"architectures", {"Qwen3ForCausalLM"}}, {"hidden_size", 16}, {"intermediate_size", 8},
          {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 8},
          {"vocab_size", vocab}, {"max_position_embeddings", 40960}, {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000}, {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}};
}

// Model folder + the Qwen3 tokenizer files (stored gzip-compressed by the tokenizer tests).
std::string qwen3_folder(int64_t vocab) {
  const json cfg = tiny_qwen3(vocab);
  const std::string dir = write_hf_folder(cfg, hf_weights(cfg), "BF16");
  const std::string src = source_path("tests/data/tokenizers/hf/qwen3");
  auto r = run_command("gzip -dc '" + src + "/tokenizer.json.gz' > '" + dir + "/tokenizer.json' && cp '" + src +
                       "/tokenizer_config.json' '" + dir + "/'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

}  // namespace

TEST(HfConvertFull, Qwen3WithTokenizer) {
  const int64_t vocab = 151936;  // Qwen3's config value: larger than the tokenizer's 151669 tokens
  const std::string dir = qwen3_folder(vocab);
  const std::string out = temp_dir() + "/qwen3-tiny.gguf";
  auto st = convert_hf_model(dir, out, HfConvertOptions{});
  ASSERT_TRUE(st.ok()) << st.error();
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f->metadata().back().first, "general.quantization_version");

  // Padding, as llama.cpp's converter does it.
  const auto* tokens = f->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), static_cast<size_t>(vocab));
  EXPECT_EQ(tokens->back(), "[PAD151935]");
  auto hf_tok = Tokenizer::load(dir);
  ASSERT_TRUE(hf_tok.ok()) << hf_tok.error();
  const int32_t n_real = (*hf_tok)->n_vocab();
  ASSERT_LT(n_real, vocab);
  EXPECT_EQ((*tokens)[n_real], fmt::format("[PAD{}]", n_real));
  EXPECT_NE((*tokens)[n_real - 1].rfind("[PAD", 0), 0u);
  auto types = f->find("tokenizer.ggml.token_type")->as_int_array();
  ASSERT_TRUE(types.has_value());
  ASSERT_EQ(types->size(), static_cast<size_t>(vocab));
  EXPECT_EQ(types->back(), 5);  // UNUSED
  EXPECT_EQ((*types)[n_real], 5);

  // The GGUF tokenizer encodes like the folder.
  auto g_tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(g_tok.ok()) << g_tok.error();
  for (const char* text : {"Hello world", " 3.14 ÷ héllo\n\n  世界!", "<|im_start|>user\nhi<|im_end|>"})
    EXPECT_EQ((*g_tok)->encode(text, true, true), (*hf_tok)->encode(text, true, true)) << text;
  EXPECT_EQ((*g_tok)->eos_id(), (*hf_tok)->eos_id());

  // The model layer reads the hyper-parameters.
  auto mc = read_model_config(*f);
  ASSERT_TRUE(mc.ok()) << mc.error();
  EXPECT_EQ(mc->arch.name, "qwen3");
  EXPECT_EQ(mc->n_vocab, vocab);
  EXPECT_EQ(mc->n_embd, 16);
  EXPECT_EQ(mc->head_dim, 8);
  EXPECT_EQ(mc->n_head_kv, 1);
  EXPECT_EQ(mc->n_rot, 8);
  EXPECT_TRUE(mc->tied_output);
  EXPECT_FLOAT_EQ(mc->rope_theta, 1e6f);
}

TEST(HfConvertFull, TokenizerLargerThanVocabIsAnError) {
  const std::string dir = qwen3_folder(1000);
  auto st = convert_hf_model(dir, temp_dir() + "/x.gguf", HfConvertOptions{});
  ASSERT_FALSE(st.ok());
  EXPECT_ERROR_HAS(st.error(), "but config.json's vocab_size is 1000");
}

TEST(HfConvertFull, MissingTokenizerIsAnError) {
  const json cfg = tiny_qwen3(64);
  const std::string dir = write_hf_folder(cfg, hf_weights(cfg), "F32");
  auto st = convert_hf_model(dir, temp_dir() + "/x.gguf", HfConvertOptions{});
  ASSERT_FALSE(st.ok());
  EXPECT_ERROR_HAS(st.error(), "tokenizer.json");
}

TEST(HfConvertFull, Cli) {
  const std::string dir = qwen3_folder(151936);
  const std::string out = temp_dir() + "/cli.gguf";
  auto r = run_command("'" + tokenmill_binary() + "' convert '" + dir + "' -o '" + out + "' --outtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::F32);
  EXPECT_EQ(f->get_int("general.file_type"), 0);
  EXPECT_EQ(f->get_string("general.name"), "hf-model");

  r = run_command("'" + tokenmill_binary() + "' convert --hf '" + dir + "' -o '" + out + "2' --name tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto g = GgufFile::open(out + "2");
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->find_tensor("token_embd.weight")->type, DType::BF16);  // auto keeps the source dtype
  EXPECT_EQ(g->get_string("general.name"), "tiny");

  r = run_command("'" + tokenmill_binary() + "' convert --hf '" + dir + "/nope' -o '" + out + "3'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_ERROR_HAS(r.err, "config.json");
  r = run_command("'" + tokenmill_binary() + "' convert --hf '" + dir + "' -o '" + out + "4' --outtype q4");
  EXPECT_NE(r.exit_code, 0);
}
