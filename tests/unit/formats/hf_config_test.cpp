// config.json parsing: real configs' fields, defaults, rope scaling variants and validation errors.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/hf_config.h"

using namespace tmill;

namespace {
#define EXPECT_ERROR_HAS(err, phrase) EXPECT_NE((err).find(phrase), std::string::npos) << "error: " << (err)

std::string error_of(const std::string& json) {
  auto r = parse_hf_config(json, "cfg.json");
  return r.ok() ? "<parsed OK>" : r.error();
}
}  // namespace

// Field values as in Qwen2.5-0.5B's config.json.
TEST(HfConfig, Qwen25) {
  auto c = parse_hf_config(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->gguf_arch, "qwen2");
  EXPECT_EQ(c->hidden_size, 896);
  EXPECT_EQ(c->intermediate_size, 4864);
  EXPECT_EQ(c->num_hidden_layers, 24);
  EXPECT_EQ(c->num_attention_heads, 14);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_FALSE(c->head_dim_in_config);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_TRUE(c->attention_bias);  // qwen2 always has q/k/v biases
  EXPECT_FALSE(c->permute_qk);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->rope_scaling.type, HfRopeScalingType::None);
}

// Field values as in Llama-3.2-1B's config.json.
TEST(HfConfig, Llama32WithLlama3Scaling) {
  auto c = parse_hf_config(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "head_dim": 64, "hidden_size": 2048,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 128256})");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->gguf_arch, "llama");
  EXPECT_TRUE(c->permute_qk);
  EXPECT_TRUE(c->head_dim_in_config);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->rope_scaling.type, HfRopeScalingType::Llama3);
  EXPECT_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  auto f = llama3_rope_factors(*c);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f.front(), 1.0f);   // highest frequency: unscaled
  EXPECT_EQ(f.back(), 32.0f);   // lowest: divided by the factor
}

TEST(HfConfig, DefaultsAndVariants) {
  // Mistral: no head_dim, kv heads given; defaults for eps/theta; sliding_window only warned about.
  auto m = parse_hf_config(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, "sliding_window": 4096, "max_position_embeddings": 32768})");
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->gguf_arch, "llama");
  EXPECT_EQ(m->head_dim, 128);
  EXPECT_EQ(m->rms_norm_eps, 1e-6);
  EXPECT_EQ(m->rope_theta, 10000.0);
  EXPECT_FALSE(m->tie_word_embeddings);
  // Minimal llama: kv heads default to heads, max_position_embeddings to transformers' 2048.
  auto l = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 5, "rope_scaling": null})");
  ASSERT_TRUE(l.ok()) << l.error();
  EXPECT_EQ(l->num_key_value_heads, 2);
  EXPECT_EQ(l->max_position_embeddings, 2048);
  // Qwen3 with explicit head_dim and attention_bias false.
  auto q = parse_hf_config(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "head_dim": 128,
    "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "vocab_size": 151936, "attention_bias": false, "rope_theta": 1000000})");
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_TRUE(q->qk_norm);
  EXPECT_FALSE(q->attention_bias);
  EXPECT_EQ(q->q_dim(), 2048);
  EXPECT_EQ(q->kv_dim(), 1024);
  EXPECT_EQ(q->rope_theta, 1e6);  // an integer in JSON is fine for a float field
  // transformers 5 style rope_parameters.
  auto p = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 5,
    "rope_parameters": {"rope_theta": 500000.0, "rope_type": "linear", "factor": 2.0}})");
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->rope_theta, 500000.0);
  EXPECT_EQ(p->rope_scaling.type, HfRopeScalingType::Linear);
  EXPECT_EQ(p->rope_scaling.factor, 2.0);
  // "default" rope type is no scaling; llama3 defaults (factor 8, orig 8192 from the top level).
  auto d = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 5, "rope_scaling": {"rope_type": "default"}})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rope_scaling.type, HfRopeScalingType::None);
  auto l3 = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 5, "original_max_position_embeddings": 4096,
    "rope_scaling": {"rope_type": "llama3"}})");
  ASSERT_TRUE(l3.ok()) << l3.error();
  EXPECT_EQ(l3->rope_scaling.factor, 8.0);
  EXPECT_EQ(l3->rope_scaling.original_max_position_embeddings, 4096);
}

TEST(HfConfig, Errors) {
  const std::string base = R"("hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
    "num_attention_heads": 2, "vocab_size": 5)";
  auto with = [&](const std::string& extra) {
    return error_of("{\"architectures\": [\"LlamaForCausalLM\"], " + base + extra + "}");
  };
  EXPECT_EQ(with(""), "<parsed OK>");
  EXPECT_ERROR_HAS(error_of("{"), "cfg.json: not valid JSON");
  EXPECT_ERROR_HAS(error_of("[]"), "not a JSON object");
  EXPECT_ERROR_HAS(error_of("{" + base + "}"), "missing \"architectures\"");
  EXPECT_ERROR_HAS(error_of("{\"architectures\": [\"BertModel\"], " + base + "}"),
                   "unsupported architecture 'BertModel' (supported: LlamaForCausalLM, MistralForCausalLM, "
                   "Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, "
                   "Qwen3MoeForCausalLM, OlmoeForCausalLM, GptOssForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                   "Gemma3ForConditionalGeneration, Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration, "
                   "Qwen3VLForConditionalGeneration, Mistral3ForConditionalGeneration, GemmaForCausalLM, GraniteForCausalLM, "
                     "SmolLM3ForCausalLM, Olmo2ForCausalLM, Olmo3ForCausalLM, Exaone4ForCausalLM, Glm4ForCausalLM, "
                     "GraniteMoeForCausalLM, Ministral3ForCausalLM, Glm4MoeForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, MiniMaxM2ForCausalLM, SeedOssForCausalLM, Lfm2ForCausalLM)");
  EXPECT_ERROR_HAS(error_of(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8})"),
                   "missing required field \"intermediate_size\"");
  EXPECT_ERROR_HAS(with(R"(, "num_key_value_heads": 3)"), "not a multiple of num_key_value_heads 3");
  EXPECT_ERROR_HAS(with(R"(, "head_dim": 3)"), "head_dim 3 must be even");
  EXPECT_ERROR_HAS(with(R"(, "rms_norm_eps": "small")"), "\"rms_norm_eps\" must be a number");
  EXPECT_ERROR_HAS(with(R"(, "rope_theta": -1)"), "must be positive");
  EXPECT_ERROR_HAS(with(R"(, "tie_word_embeddings": 1)"), "must be true or false");
  EXPECT_ERROR_HAS(with(R"(, "max_position_embeddings": 1.5)"), "must be an integer");
  EXPECT_ERROR_HAS(with(R"(, "rope_scaling": {"type": "dynamic", "factor": 2.0})"),
                   "unsupported rope_scaling type 'dynamic' (supported: linear, llama3, yarn, longrope)");
  // longrope (phi3) needs its per-dimension factor arrays.
  EXPECT_ERROR_HAS(with(R"(, "rope_scaling": {"rope_type": "longrope"})"), "needs a non-empty \"short_factor\" array");
  EXPECT_ERROR_HAS(with(R"(, "rope_scaling": {"type": "linear"})"), "needs a positive \"factor\"");
  EXPECT_ERROR_HAS(with(R"(, "rope_scaling": 2)"), "\"rope_scaling\" must be an object");
  EXPECT_ERROR_HAS(with(R"(, "rope_scaling": {"rope_type": "llama3", "low_freq_factor": 4, "high_freq_factor": 1})"),
                   "high_freq_factor > low_freq_factor");
  auto wrong = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 9, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 5})");
  ASSERT_FALSE(wrong.ok());
  EXPECT_ERROR_HAS(wrong.error(), "hidden_size 9 is not a multiple of num_attention_heads 2");
}

// gpt-oss-20b's config.json (huggingface.co/openai/gpt-oss-20b): its MXFP4 quantization_config is
// OpenAI's own format, converted, not refused; experts, window and YaRN's beta_fast / beta_slow read.
TEST(HfConfig, GptOss20b) {
  std::string layer_types;
  for (int i = 0; i < 24; ++i) layer_types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  const std::string text = R"({
    "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": [)" + layer_types + R"(], "max_position_embeddings": 131072, "model_type": "gpt_oss",
    "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8,
    "num_local_experts": 32, "output_router_logits": false, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
      "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
      "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true, "vocab_size": 201088})";
  auto c = parse_hf_config(text);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->gguf_arch, "gpt-oss");
  EXPECT_TRUE(c->mxfp4);
  EXPECT_EQ(c->n_expert, 32);
  EXPECT_EQ(c->n_expert_used, 4);
  EXPECT_EQ(c->expert_rows(), 2880);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->q_dim(), 4096);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_EQ(c->rope_theta, 150000.0);
  EXPECT_EQ(c->rope_scaling.type, HfRopeScalingType::Yarn);
  EXPECT_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c->rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c->rope_scaling.beta_slow, 1.0);
  EXPECT_TRUE(std::isnan(c->rope_scaling.attention_factor));
  // what GGUF gpt-oss cannot express
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return error_of(t);
  };
  EXPECT_ERROR_HAS(edited("\"sliding_window\": 128", "\"sliding_window\": 0"), "\"sliding_window\" = 0 is out of range");
  EXPECT_ERROR_HAS(edited("\"sliding_attention\", \"full", "\"full_attention\", \"full"),
                   "layer_types[0] is \"full_attention\", expected \"sliding_attention\"");
  EXPECT_ERROR_HAS(edited("\"quant_method\": \"mxfp4\"", "\"quant_method\": \"hqq\""), "quantized with 'hqq'");
  EXPECT_ERROR_HAS(edited("\"GptOssForCausalLM\"", "\"LlamaForCausalLM\""), "quantized with MXFP4");
  // OpenAI's own spelling of the experts per token, when transformers' is absent
  std::string t = text;
  const std::string key = "\"num_experts_per_tok\": 4";
  t.replace(t.find(key), key.size(), "\"num_experts_per_tak\": 9");
  auto c2 = parse_hf_config(t);
  ASSERT_TRUE(c2.ok()) << c2.error();
  EXPECT_EQ(c2->n_expert_used, 4);
}

// Weights quantized by another tool: config.json's quantization_config is refused, naming the format.
TEST(HfConfig, QuantizedWeightsAreRefusedNamingTheFormat) {
  const std::string base = R"("architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 24,
    "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10)";
  struct Case {
    const char* qc;
    const char* format;
  };
  for (const Case& c : {Case{R"({"quant_method": "bitsandbytes", "load_in_4bit": true})", "bitsandbytes"},
                        Case{R"({"load_in_8bit": true})", "bitsandbytes"},
                        Case{R"({"quant_method": "compressed-tensors"})", "compressed-tensors"},
                        Case{R"({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights":
                               {"type": "int", "num_bits": 4}}}})", "compressed-tensors"},
                        Case{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights":
                               {"type": 5, "num_bits": "8"}}, "h": 3}})", "compressed-tensors"},
                        Case{R"({"quant_method": "hqq"})", "'hqq'"}}) {
    SCOPED_TRACE(c.qc);
    const std::string err = error_of("{" + base + R"(, "quantization_config": )" + c.qc + "}");
    EXPECT_ERROR_HAS(err, std::string("the weights are quantized with ") + c.format);
    EXPECT_ERROR_HAS(err, "--quantization");
  }
  // FP8 checkpoints are read (dequantized at conversion: tests/unit/convert/hf_fp8_test.cpp): quant_method
  // fp8 with its blocks, compressed-tensors with 8-bit float weights
  auto fp8 = parse_hf_config("{" + base + R"(, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}})");
  ASSERT_TRUE(fp8.ok()) << fp8.error();
  EXPECT_TRUE(fp8->fp8);
  EXPECT_EQ(fp8->fp8_block[0], 128);
  EXPECT_EQ(fp8->fp8_block[1], 64);
  auto ct = parse_hf_config("{" + base + R"(, "quantization_config": {"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"type": "float", "num_bits": 8, "strategy": "channel"}}}}})");
  ASSERT_TRUE(ct.ok()) << ct.error();
  EXPECT_TRUE(ct->fp8);
  auto odd = parse_hf_config("{" + base + R"(, "quantization_config": {"quant_method": "fp8", "weight_block_size": "x"}})");
  ASSERT_TRUE(odd.ok()) << odd.error();  // (a block size that is no pair of positive integers: 128 x 128)
  EXPECT_EQ(odd->fp8_block[0], 128);
  // GPTQ, AWQ and compressed-tensors' pack-quantized integers are read (tests/unit/convert/hf_packed_test.cpp)
  using P = HfConfig::Packed;
  struct Packed {
    const char* qc;
    P format;
    int bits;
    int64_t group;
    bool minus_one;
  };
  for (const Packed& c :
       {Packed{R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false})", P::Gptq, 4, 128, true},
        Packed{R"({"quant_method": "gptq", "bits": 8, "group_size": -1, "checkpoint_format": "gptq_v2"})", P::Gptq, 8, 0, false},
        Packed{R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "GEMM", "zero_point": true})", P::Awq, 4, 128, false},
        Packed{R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 64})", P::Awq, 4, 64, false},
        Packed{R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0":
                 {"targets": ["Linear"], "weights": {"type": "int", "num_bits": 4, "strategy": "group", "group_size": 128,
                 "symmetric": true}}}, "ignore": ["lm_head"]})", P::CompressedTensors, 4, 128, false},
        Packed{R"({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"format": "pack-quantized",
                 "weights": {"num_bits": 8, "strategy": "channel"}}}})", P::CompressedTensors, 8, 0, false}}) {
    SCOPED_TRACE(c.qc);
    auto cfg = parse_hf_config("{" + base + R"(, "quantization_config": )" + c.qc + "}");
    ASSERT_TRUE(cfg.ok()) << cfg.error();
    EXPECT_EQ(cfg->packed, c.format);
    EXPECT_EQ(cfg->packed_bits, c.bits);
    EXPECT_EQ(cfg->packed_group, c.group);
    EXPECT_EQ(cfg->gptq_zero_minus_one, c.minus_one || c.format != P::Gptq);
  }
  // ... and their variants tokenmill does not read are refused naming the field
  for (const auto& [qc, phrase] : std::vector<std::pair<std::string, std::string>>{
           {R"({"quant_method": "gptq", "bits": 3})", "GPTQ with bits 3"},
           {R"({"quant_method": "gptq", "group_size": 128})", "quantization_config lacks \"bits\""},
           {R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})", "GPTQ checkpoint_format \"marlin\""},
           {R"({"quant_method": "gptq", "bits": 4, "group_size": -5})", "group_size -5"},
           {R"({"quant_method": "awq", "bits": 4, "version": "gemv"})", "AWQ version \"gemv\""},
           {R"({"quant_method": "awq", "bits": 8})", "AWQ with bits 8"},
           {R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g":
              {"weights": {"num_bits": 2, "group_size": 8}}}})", "2-bit packed weights"},
           {R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g":
              {"weights": {"num_bits": 4, "strategy": "tensor"}}}})", "strategy \"tensor\""},
           {R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g":
              {"weights": {"num_bits": 4}}}})", "strategy group without a positive group_size"},
           {R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"a":
              {"weights": {"num_bits": 4, "group_size": 32}}, "b": {"weights": {"num_bits": 4, "group_size": 64}}}})",
            "config groups of different bits or group sizes"}}) {
    SCOPED_TRACE(qc);
    EXPECT_ERROR_HAS(error_of("{" + base + R"(, "quantization_config": )" + qc + "}"), phrase);
  }
  // A quantization_config without a method is not a quantized checkpoint.
  auto ok = parse_hf_config("{" + base + R"(, "quantization_config": {"foo": 1}})");
  EXPECT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(hf_quant_format_name("awq_marlin"), "AWQ");
  EXPECT_EQ(hf_quant_format_name("fbgemm_fp8"), "FP8");
}
