// Models loaded without a separate convert step (convert/model_source.h): a Hugging Face folder is
// converted in memory to exactly the bytes `tokenmill convert` writes, quantized at load to exactly
// what `tokenmill quantize` writes; a split GGUF is merged to exactly the unsplit file; another
// tool's quantized weights are refused naming the format. Then the CLI: generate and serve from a
// folder give the same greedy tokens as the converted GGUF.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "convert/hf_convert.h"
#include "convert/model_quantizer.h"
#include "convert/model_source.h"
#include "core/mmap.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

// A one-layer Qwen3 shape with rows of 32 (Q8_0 blocks) and the real Qwen3 tokenizer and chat template.
std::string qwen3_folder() {
  const json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"hidden_size", 32}, {"intermediate_size", 64},
                    {"num_hidden_layers", 1}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                    {"head_dim", 8}, {"vocab_size", 151936}, {"max_position_embeddings", 4096},
                    {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000}, {"tie_word_embeddings", true},
                    {"torch_dtype", "bfloat16"}};
  const std::string dir = write_hf_folder(cfg, hf_weights(cfg), "BF16", /*sharded=*/true);
  const std::string src = source_path("tests/data/tokenizers/hf/qwen3");
  auto r = run_command("gzip -dc '" + src + "/tokenizer.json.gz' > '" + dir + "/tokenizer.json' && cp '" + src +
                       "/tokenizer_config.json' '" + dir + "/'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

const std::string& folder() {
  static const std::string dir = qwen3_folder();
  return dir;
}

// The converted GGUF, as `tokenmill convert` writes it.
const std::string& converted() {
  static const std::string path = [] {
    const std::string p = temp_dir() + "/hf-model.gguf";
    auto st = convert_hf_model(folder(), p, HfConvertOptions{});
    EXPECT_TRUE(st.ok()) << st.error();
    return p;
  }();
  return path;
}

std::string bytes_of(const std::string& path) {
  auto b = read_file(path);
  EXPECT_TRUE(b.ok()) << b.error();
  return b.ok() ? *b : "";
}

std::string bin() { return "'" + tokenmill_binary() + "'"; }

// `generate --json` greedy tokens of a model given as it is on the command line.
json greedy(const std::string& model_args) {
  auto r = run_command(bin() + " generate " + model_args +
                       " --prompt 'The capital of France is' --temperature 0 --max-tokens 12 --ignore-eos --json "
                       "--max-model-len 128 --kv-cache-memory 16MiB");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? json() : j["tokens"];
}

}  // namespace

TEST(ModelSource, HfFolderInMemoryIsTheConvertedFile) {
  ASSERT_EQ(model_source_kind(folder()), ModelSourceKind::HfFolder);
  std::vector<std::string> stages;
  ModelLoadOptions o;
  o.progress = [&](const std::string& st, size_t done, size_t n, const std::string&) {
    if (done == n) stages.push_back(st);
  };
  auto p = prepare_model(folder(), o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->kind, ModelSourceKind::HfFolder);
  EXPECT_EQ(p->path.rfind("/proc/self/fd/", 0), 0u) << p->path;
  EXPECT_EQ(p->steps, "Hugging Face folder converted in memory");
  EXPECT_EQ(stages, std::vector<std::string>{"convert"});
  EXPECT_TRUE(bytes_of(p->path) == bytes_of(converted()));

  // --dtype: the type convert --outtype writes
  o.dtype = "float16";
  auto f16 = prepare_model(folder(), o);
  ASSERT_TRUE(f16.ok()) << f16.error();
  EXPECT_EQ(f16->steps, "Hugging Face folder converted in memory to f16");
  HfConvertOptions co;
  co.outtype = "f16";
  const std::string f16_file = temp_dir() + "/f16.gguf";
  ASSERT_TRUE(convert_hf_model(folder(), f16_file, co).ok());
  EXPECT_TRUE(bytes_of(f16->path) == bytes_of(f16_file));
  // a GGUF converted at load: what `tokenmill quantize --type F16 --pure` writes
  auto g16 = prepare_model(converted(), o);
  ASSERT_TRUE(g16.ok()) << g16.error();
  auto g = GgufFile::open(g16->path);
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->find_tensor("token_embd.weight")->type, DType::F16);
  EXPECT_EQ(g->find_tensor("blk.0.attn_norm.weight")->type, DType::F32);
}

TEST(ModelSource, SplitGgufIsMergedIntoTheUnsplitFile) {
  auto whole = GgufFile::open(converted());
  ASSERT_TRUE(whole.ok()) << whole.error();
  // Split as llama.cpp's gguf-split does: the metadata in the first shard, tensors shared out.
  const std::string d = temp_dir();
  const auto& ts = whole->tensors();
  const size_t half = ts.size() / 2;
  for (int s = 0; s < 2; ++s) {
    GgufWriter w(static_cast<uint32_t>(whole->alignment()));
    if (s == 0)
      for (const auto& [k, v] : whole->metadata()) w.set(k, v);
    w.set("split.no", GgufValue::u16(static_cast<uint16_t>(s)));
    w.set("split.count", GgufValue::u16(2));
    w.set("split.tensors.count", GgufValue::i32(static_cast<int32_t>(ts.size())));
    for (size_t i = s == 0 ? 0 : half; i < (s == 0 ? half : ts.size()); ++i)
      ASSERT_TRUE(w.add_tensor(ts[i].name, ts[i].type, ts[i].ne, ts[i].data).ok());
    ASSERT_TRUE(w.write(d + "/qwen-" + (s == 0 ? "00001" : "00002") + "-of-00002.gguf").ok());
  }
  const std::string first = d + "/qwen-00001-of-00002.gguf";
  ASSERT_EQ(model_source_kind(first), ModelSourceKind::SplitGguf);
  auto p = prepare_model(first, ModelLoadOptions{});
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->steps, "2 shards merged in memory");
  EXPECT_TRUE(bytes_of(p->path) == bytes_of(converted()));
  // the engine's view: generate from the first shard = from the whole file
  EXPECT_EQ(greedy("--model '" + first + "'"), greedy("--model '" + converted() + "'"));
  std::filesystem::remove(d + "/qwen-00002-of-00002.gguf");
  auto missing = prepare_model(first, ModelLoadOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_ERROR_HAS(missing.error(), "shard 2 of 2 is missing");
}

TEST(ModelSource, BadOptionsAreRefusedNamingWhy) {
  ModelLoadOptions o;
  o.dtype = "int4";
  EXPECT_ERROR_HAS(check_model_load_options(o).error(), "--dtype int4: expected auto, float16 (half), bfloat16");
  o = {};
  o.quantization = "bitsandbytes";
  EXPECT_ERROR_HAS(check_model_load_options(o).error(),
                   "--quantization bitsandbytes: tokenmill does not load bitsandbytes weights");
  o.quantization = "awq";  // a checkpoint's own format: accepted for an AWQ folder (hf_packed_test.cpp), else refused
  EXPECT_TRUE(check_model_load_options(o).ok());
  auto not_awq = prepare_model(converted(), o);
  ASSERT_FALSE(not_awq.ok());
  EXPECT_ERROR_HAS(not_awq.error(), "is no AWQ checkpoint");
  o.quantization = "q9_9";
  EXPECT_ERROR_HAS(check_model_load_options(o).error(), "unknown quantization type 'q9_9'");
  o.quantization = "Q4_K_M";
  EXPECT_TRUE(check_model_load_options(o).ok());
  o.dtype = "bfloat16";
  auto both = prepare_model(converted(), o);
  ASSERT_FALSE(both.ok());
  EXPECT_ERROR_HAS(both.error(), "give one of them for a GGUF file");
  const std::string empty = temp_dir();
  auto no_config = prepare_model(empty, ModelLoadOptions{});
  ASSERT_FALSE(no_config.ok());
  EXPECT_ERROR_HAS(no_config.error(), "a folder without config.json: not a Hugging Face model folder");
}

// Another tool's quantized weights, told from the tensors when config.json does not say.
TEST(ModelSource, QuantizedHfWeightsAreRefusedNamingTheFormat) {
  struct Case {
    std::vector<StTensor> tensors;
    const char* format;
  };
  auto t = [](const std::string& name, const std::string& dtype) {  // 4 elements of 1 (F8_E4M3, U8) or 4 bytes
    const size_t esize = dtype == "I32" ? 4 : 1;
    return StTensor{name, dtype, {4}, std::vector<uint8_t>(4 * esize, 0)};
  };
  const std::string q = "model.layers.0.self_attn.q_proj.";
  for (const Case& c : {Case{{t(q + "qweight", "I32"), t(q + "qzeros", "I32"), t(q + "scales", "I32")}, "AWQ"},
                        Case{{t(q + "g_idx", "I32"), t(q + "qweight", "I32"), t(q + "qzeros", "I32")}, "GPTQ"},
                        Case{{t(q + "weight", "F8_E4M3"), t(q + "weight_scale", "I32")}, "FP8"},
                        Case{{t(q + "weight", "U8"), t(q + "weight.absmax", "I32")}, "bitsandbytes"}}) {
    SCOPED_TRACE(c.format);
    const std::string dir = temp_dir();
    write_text(dir + "/config.json", tiny_llama_config().dump());
    write_bytes(dir + "/model.safetensors", build_safetensors(c.tensors));
    auto p = prepare_model(dir, ModelLoadOptions{});
    ASSERT_FALSE(p.ok());
    EXPECT_ERROR_HAS(p.error(), std::string("the weights are quantized: ") + c.format);
    auto r = run_command(bin() + " convert '" + dir + "' -o '" + dir + "/x.gguf'");  // convert refuses too
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_ERROR_HAS(r.err, c.format);
  }
  // config.json's quantization_config: serve refuses the folder at start-up
  const std::string dir = temp_dir();
  json cfg = tiny_llama_config();
  cfg["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
  write_text(dir + "/config.json", cfg.dump());
  auto r = run_command(bin() + " serve --port 0 '" + dir + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_ERROR_HAS(r.err, "the weights are quantized with bitsandbytes");
}

// The CLI: generate from the folder = from the converted file; quantized at load = the quantized file.
TEST(ModelSource, GenerateFromFolderEqualsConvertedGguf) {
  const json from_file = greedy("--model '" + converted() + "'");
  ASSERT_EQ(from_file.size(), 12u);
  EXPECT_EQ(greedy("--model '" + folder() + "'"), from_file);
  const std::string q8 = temp_dir() + "/q8.gguf";
  auto r = run_command(bin() + " quantize -q '" + converted() + "' '" + q8 + "' --type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json q8_tokens = greedy("--model '" + q8 + "'");
  EXPECT_EQ(greedy("--model '" + folder() + "' --quantization q8_0"), q8_tokens);
  // the load is timed and the steps said; progress lines (not a terminal) for each stage
  r = run_command(bin() + " generate --model '" + folder() + "/' --quantization q8_0 --max-tokens 1 --max-model-len 64 "
                  "--kv-cache-memory 8MiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("Hugging Face folder converted in memory, quantized to Q8_0 in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("load: convert: 100% ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("load: quantize: 100% ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("weights Q8_0) loaded in "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
}

// `tokenmill serve FOLDER` as `vllm serve FOLDER`: a greedy completion equal to generate's, the
// folder's chat template, and vLLM's several --served-model-name values (the first is the id, the
// others aliases).
TEST(ModelSource, ServeFolder) {
  const std::string log = temp_dir() + "/serve.log";
  const std::string script =
      bin() + " serve '" + folder() + "/' --port 0 --max-model-len 128 --kv-cache-memory 16MiB --served-model-name "
      "hf-model tiny-qwen3 > '" + log +
      "' 2>&1 & pid=$!; port=; for i in $(seq 600); do port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' '" + log +
      R"(' | grep -o '[0-9]*$'); [ -n "$port" ] && curl -sf http://127.0.0.1:$port/health >/dev/null && break; )"
      R"(sleep 0.1; done; curl -s http://127.0.0.1:$port/v1/models; echo; )"
      R"(curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' -d '{"model": )"
      R"("hf-model", "prompt": "The capital of France is", "max_tokens": 12, "temperature": 0, "ignore_eos": true}'; )"
      R"(echo; curl -s http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' -d )"
      R"('{"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}'; echo; )"
      R"(kill $pid; wait $pid)";
  auto r = run_command(script);
  const std::string server_log = bytes_of(log);
  ASSERT_EQ(r.exit_code, 0) << r.err << server_log;
  const auto nl = r.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << r.out << server_log;
  auto models = json::parse(r.out.substr(0, nl), nullptr, false);
  ASSERT_FALSE(models.is_discarded()) << r.out << server_log;
  EXPECT_EQ(models["data"][0]["id"], "hf-model");
  EXPECT_EQ(models["data"][0]["aliases"], json::array({"tiny-qwen3"})) << models;
  const auto nl2 = r.out.find('\n', nl + 1);
  ASSERT_NE(nl2, std::string::npos) << r.out;
  auto completion = json::parse(r.out.substr(nl + 1, nl2 - nl - 1), nullptr, false);
  ASSERT_FALSE(completion.is_discarded()) << r.out;
  // the chat template comes from the folder's tokenizer_config.json (Qwen3's ChatML)
  auto chat = json::parse(r.out.substr(nl2 + 1), nullptr, false);
  ASSERT_FALSE(chat.is_discarded()) << r.out;
  EXPECT_TRUE(chat["choices"][0]["message"].is_object()) << r.out;
  EXPECT_EQ(chat["model"], "hf-model") << r.out;
  EXPECT_GT(chat["usage"]["prompt_tokens"].get<int>(), 5) << r.out;
  auto gen = run_command(bin() + " generate --model '" + converted() +
                         "' --prompt 'The capital of France is' --temperature 0 --max-tokens 12 --ignore-eos --json "
                         "--max-model-len 128 --kv-cache-memory 16MiB");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(completion["choices"][0]["text"], json::parse(gen.out)["text"]) << r.out;
  EXPECT_NE(server_log.find("Hugging Face folder converted in memory in "), std::string::npos) << server_log;
  EXPECT_NE(server_log.find(" loaded in "), std::string::npos) << server_log;
}

TEST(ModelSource, QuantizedAtLoadIsTheQuantizedFile) {
  const std::string q8 = temp_dir() + "/q8.gguf";
  QuantizeModelOptions q;
  q.input = converted();
  q.output = q8;
  q.recipe = *recipe_from_name("q8_0");
  ASSERT_TRUE(quantize_model(q).ok());
  for (const std::string& source : {folder(), converted()}) {
    SCOPED_TRACE(source);
    ModelLoadOptions o;
    o.quantization = "q8_0";
    auto p = prepare_model(source, o);
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_NE(p->steps.find("quantized to Q8_0"), std::string::npos) << p->steps;
    EXPECT_TRUE(bytes_of(p->path) == bytes_of(q8));
    auto est = estimate_model_bytes(source, o);
    ASSERT_TRUE(est.ok()) << est.error();
    auto qf = GgufFile::open(q8);
    ASSERT_TRUE(qf.ok()) << qf.error();
    double weights = 0;  // the tensors (the file also holds the tokenizer's vocabulary)
    for (const auto& t : qf->tensors()) weights += static_cast<double>(t.nbytes);
    EXPECT_NEAR(static_cast<double>(*est), weights, 0.05 * weights);  // the estimate, before loading
  }
}
