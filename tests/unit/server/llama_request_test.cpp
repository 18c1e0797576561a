// llama-server's native /completion request mapping (llama_request.h) and its result shapes
// (llama_response.h), against the bundled stories260K tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "server/llama_request.h"
#include "server/llama_response.h"
#include "server_test_data.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

using test::stories_tokenizer;

ServerContext context() {
  ServerContext c;
  c.served_model_name = "stories";
  c.tokenizer = stories_tokenizer();
  c.max_model_len = 64;
  c.n_vocab = c.tokenizer->n_vocab();
  c.max_tokens_default = 20;
  c.max_n = 4;
  c.max_logprobs = 5;
  return c;
}

MappedRequest native_ok(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_native_completion_request(body, c, &err);
  EXPECT_TRUE(r.ok()) << body.dump() << ": " << (r.ok() ? "" : r.error());
  return r.ok() ? std::move(r).value() : MappedRequest{};
}

ApiError native_err(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_native_completion_request(body, c, &err);
  EXPECT_FALSE(r.ok()) << body.dump();
  return err;
}

const GenerateRequest& req0(const MappedRequest& m) { return m.prompts.at(0).request; }

}  // namespace

TEST(LlamaRequest, NPredictIsMaxTokensAndMinusOneIsTheRestOfTheContext) {
  MappedRequest m = native_ok({{"prompt", "Once upon a time"}, {"n_predict", 7}});
  EXPECT_EQ(m.kind, ApiKind::Native);
  EXPECT_EQ(req0(m).max_tokens, 7);
  EXPECT_EQ(m.native.generation_settings["n_predict"], 7);
  // n_predict wins over its aliases; max_tokens alone works too
  EXPECT_EQ(req0(native_ok({{"prompt", "Once"}, {"n_predict", 3}, {"max_tokens", 9}})).max_tokens, 3);
  EXPECT_EQ(req0(native_ok({{"prompt", "Once"}, {"max_tokens", 9}})).max_tokens, 9);
  // -1 or absent: up to the context's end (64 tokens), capped by --max-tokens-default (20) as chat is
  for (json np : {json(-1), json(nullptr)}) {
    json body = {{"prompt", "Once upon a time"}};
    if (!np.is_null()) body["n_predict"] = np;
    EXPECT_EQ(req0(native_ok(body)).max_tokens, 20) << body.dump();
  }
  ServerContext wide = context();
  wide.max_tokens_default = 0;
  const MappedRequest all = native_ok({{"prompt", "Once upon a time"}}, wide);
  EXPECT_EQ(req0(all).max_tokens, 64 - static_cast<int32_t>(req0(all).prompt.size()));
  EXPECT_EQ(all.native.generation_settings["n_predict"], -1);
  // 0: the prompt is evaluated (one token generated and not returned)
  const MappedRequest warm = native_ok({{"prompt", "Once"}, {"n_predict", 0}});
  EXPECT_TRUE(warm.native.prompt_only);
  EXPECT_EQ(req0(warm).max_tokens, 1);
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"n_predict", -2}}).param, "n_predict");
}

TEST(LlamaRequest, SamplingFieldsAndLlamaServersDefaults) {
  const MappedRequest d = native_ok({{"prompt", "Once"}});
  const SamplingParams& s = req0(d).sampling;
  EXPECT_FLOAT_EQ(s.temperature, kLlamaTemperature);
  EXPECT_EQ(s.top_k, kLlamaTopK);
  EXPECT_FLOAT_EQ(s.top_p, kLlamaTopP);
  EXPECT_FLOAT_EQ(s.min_p, kLlamaMinP);
  EXPECT_FALSE(s.seed.has_value());
  // the server's own defaults (--generation-config, --temp) come before llama-server's
  ServerContext c = context();
  c.defaults.temperature = 0.3f;
  c.defaults.top_k = 7;
  const MappedRequest cm = native_ok({{"prompt", "Once"}}, c);
  const SamplingParams& cs = req0(cm).sampling;
  EXPECT_FLOAT_EQ(cs.temperature, 0.3f);
  EXPECT_EQ(cs.top_k, 7);
  EXPECT_FLOAT_EQ(cs.top_p, kLlamaTopP);
  // a request's own fields win; llama-server's names map to the engine's
  const MappedRequest m = native_ok({{"prompt", "Once"},
                                     {"temperature", 0},
                                     {"top_k", 0},
                                     {"repeat_penalty", 1.3},
                                     {"presence_penalty", 0.5},
                                     {"seed", 42},
                                     {"n_probs", 3},
                                     {"n_cmpl", 2},
                                     {"stop", {"\n"}},
                                     {"ignore_eos", true}});
  const GenerateRequest& r = req0(m);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.3f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_TRUE(m.logprobs);
  EXPECT_EQ(m.top_logprobs, 3);
  EXPECT_EQ(m.n, 2);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.ignore_eos);
  const json& g = m.native.generation_settings;
  EXPECT_FLOAT_EQ(g["repeat_penalty"].get<float>(), 1.3f);
  EXPECT_EQ(g["n_probs"], 3);
  EXPECT_EQ(g["seed"], 42);
  EXPECT_EQ(g["stop"], json({"\n"}));
  // seed -1 (and 2^32-1, llama.cpp's "default seed") ask for a random one
  EXPECT_FALSE(req0(native_ok({{"prompt", "Once"}, {"seed", -1}})).sampling.seed.has_value());
  EXPECT_FALSE(req0(native_ok({{"prompt", "Once"}, {"seed", 4294967295u}})).sampling.seed.has_value());
  // repeat_last_n 0 turns llama.cpp's three penalties off
  const MappedRequest off =
      native_ok({{"prompt", "Once"}, {"repeat_last_n", 0}, {"repeat_penalty", 1.3}, {"frequency_penalty", 0.4}});
  EXPECT_FALSE(req0(off).sampling.penalties());
  EXPECT_EQ(off.native.generation_settings["repeat_last_n"], 0);
  // more alternatives than --max-logprobs
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"n_probs", 6}}).param, "n_probs");
}

TEST(LlamaRequest, SamplersThisEngineLacksAreRefusedWhenTurnedOn) {
  const std::vector<std::pair<json, std::string>> on = {
      {{{"mirostat", 2}}, "mirostat"},
      {{{"dry_multiplier", 0.8}}, "dry_multiplier"},
      {{{"dynatemp_range", 0.5}}, "dynatemp_range"},
      {{{"typical_p", 0.9}}, "typical_p"},
      {{{"top_n_sigma", 1.5}}, "top_n_sigma"},
      {{{"adaptive_target", 0.5}}, "adaptive_target"},
      {{{"post_sampling_probs", true}}, "post_sampling_probs"},
      {{{"xtc_probability", 0.5}}, "xtc_probability"},
      {{{"xtc_probability", 0.5}, {"xtc_threshold", 0.3}}, "xtc_probability"},
  };
  for (const auto& [fields, param] : on) {
    json body = fields;
    body["prompt"] = "Once";
    const ApiError e = native_err(body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump();
    EXPECT_NE(e.message.find("not supported"), std::string::npos) << e.message;
  }
  // their "off" values (what llama.cpp's own web UI sends) are fine, and so are the slot/cache fields
  native_ok({{"prompt", "Once"}, {"mirostat", 0}, {"dry_multiplier", 0}, {"dynatemp_range", 0}, {"typical_p", 1},
             {"top_n_sigma", -1}, {"adaptive_target", -1},
             {"post_sampling_probs", false}, {"xtc_probability", 0.5}, {"xtc_threshold", 0.6}, {"cache_prompt", true},
             {"id_slot", 3}, {"n_keep", 10}, {"samplers", "edkypmxt"}, {"min_keep", 1}});
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"cache_prompt", "yes"}}).param, "cache_prompt");
}

TEST(LlamaRequest, PromptShapesMixedIdsAndStringsAndSeveralPrompts) {
  const Tokenizer& tok = *stories_tokenizer();
  const std::vector<int32_t> once = tok.encode("Once upon", true, true);  // with BOS
  const std::vector<int32_t> time = tok.encode(" a time", false, true);
  ASSERT_GE(once.size(), 2u);
  // [ids and strings]: one prompt, each string tokenized in place (special tokens only when first)
  const MappedRequest mixed = native_ok({{"prompt", json::array({1, 300, " a time"})}});
  ASSERT_EQ(mixed.prompts.size(), 1u);
  std::vector<int32_t> want = {1, 300};
  want.insert(want.end(), time.begin(), time.end());
  EXPECT_EQ(req0(mixed).prompt, want);
  const MappedRequest lead = native_ok({{"prompt", json::array({"Once upon", 300})}});
  std::vector<int32_t> want_lead = once;
  want_lead.push_back(300);
  EXPECT_EQ(req0(lead).prompt, want_lead);
  // an array without numbers is a list of prompts, each of any shape
  const MappedRequest list =
      native_ok({{"prompt", json::array({"Once upon", json::array({1, 300}), {{"prompt_string", "Once upon"}}})}});
  ASSERT_EQ(list.prompts.size(), 3u);
  EXPECT_EQ(list.prompts[0].request.prompt, once);
  EXPECT_EQ(list.prompts[1].request.prompt, (std::vector<int32_t>{1, 300}));
  EXPECT_EQ(list.prompts[2].request.prompt, once);
  // the same shapes on /v1/completions (llama-server takes them there too)
  ApiError err;
  auto oai = map_completion_request({{"prompt", json::array({1, 300, " a time"})}, {"max_tokens", 2}}, context(), &err);
  ASSERT_TRUE(oai.ok()) << oai.error();
  EXPECT_EQ(oai->prompts.at(0).request.prompt, want);
  // refused: images, a bad element, an id outside the vocabulary
  EXPECT_NE(native_err({{"prompt", {{"prompt_string", "x"}, {"multimodal_data", {"AAAA"}}}}}).message.find("text only"),
            std::string::npos);
  EXPECT_EQ(native_err({{"prompt", json::array({"Once", true})}}).param, "prompt");
  EXPECT_EQ(native_err({{"prompt", json::array({1, 100000, "x"})}}).param, "prompt");
  EXPECT_EQ(native_err({{"prompt", json::array()}}).param, "prompt");
}

TEST(LlamaRequest, LogitBiasFormsBecomeTokenIds) {
  const Tokenizer& tok = *stories_tokenizer();
  const std::vector<int32_t> upon = tok.encode(" upon", false, true);
  ASSERT_FALSE(upon.empty());
  auto bias_of = [](const MappedRequest& m) {
    std::map<int32_t, float> b;
    for (const auto& [id, v] : req0(m).sampling.logit_bias) b[id] = v;
    return b;
  };
  // [[id, bias]], [["text", false]] (false bans), {"id": bias}, {"text": bias}
  auto a = bias_of(native_ok({{"prompt", "Once"}, {"logit_bias", {{15, 2.5}, {" upon", false}}}}));
  EXPECT_FLOAT_EQ(a.at(15), 2.5f);
  for (int32_t id : upon) EXPECT_FLOAT_EQ(a.at(id), -100.0f);
  auto o = bias_of(native_ok({{"prompt", "Once"}, {"logit_bias", {{"15", -1.0}, {" upon", 3.0}}}}));
  EXPECT_FLOAT_EQ(o.at(15), -1.0f);
  for (int32_t id : upon) EXPECT_FLOAT_EQ(o.at(id), 3.0f);
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"logit_bias", {{15, true}}}}).param, "logit_bias");
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"logit_bias", {{15}}}}).param, "logit_bias");
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"logit_bias", "x"}}).param, "logit_bias");
}

TEST(LlamaRequest, ResponseOptions) {
  const MappedRequest m = native_ok({{"prompt", "Once"},
                                     {"return_tokens", true},
                                     {"timings_per_token", true},
                                     {"response_fields", {"content", "generation_settings/n_predict"}}});
  EXPECT_TRUE(m.native.return_tokens);
  EXPECT_TRUE(m.native.timings_per_token);
  EXPECT_EQ(m.native.response_fields, (std::vector<std::string>{"content", "generation_settings/n_predict"}));
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"response_fields", "content"}}).param, "response_fields");
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"response_fields", {1}}}).param, "response_fields");
}

TEST(LlamaResponse, StopTypesTimingsAndFieldSelection) {
  EXPECT_STREQ(native_stop_type(FinishReason::Stop, nullptr), "eos");
  EXPECT_STREQ(native_stop_type(FinishReason::Stop, 2), "eos");  // a stop token id
  EXPECT_STREQ(native_stop_type(FinishReason::Stop, "\n"), "word");
  EXPECT_STREQ(native_stop_type(FinishReason::Length, nullptr), "limit");
  EXPECT_STREQ(native_stop_type(FinishReason::Abort, nullptr), "none");

  NativeTimings t;
  t.cache_n = 16;
  t.prompt_n = 4;
  t.prompt_ms = 8;
  t.predicted_n = 10;
  t.predicted_ms = 50;
  const json j = native_timings_json(t);
  EXPECT_EQ(j["cache_n"], 16);
  EXPECT_DOUBLE_EQ(j["prompt_per_token_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["prompt_per_second"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(j["predicted_per_token_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["predicted_per_second"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(native_timings_json(NativeTimings{})["predicted_per_second"].get<double>(), 0.0);  // no 0/0

  NativeResult r;
  r.model = "m";
  r.content = "a\nb";
  r.tokens = {5, 6};
  r.tokens_predicted = 2;
  r.tokens_evaluated = 3;
  r.finish = FinishReason::Stop;
  r.stop_reason = "END";
  NativeOptions opts;
  json f = native_final_json(r, opts);
  EXPECT_EQ(f["stop"], true);
  EXPECT_EQ(f["has_new_line"], true);
  EXPECT_EQ(f["stop_type"], "word");
  EXPECT_EQ(f["stopping_word"], "END");
  EXPECT_EQ(f["tokens_cached"], 5);
  EXPECT_EQ(f["tokens"], json::array());  // only with return_tokens
  EXPECT_FALSE(f.contains("completion_probabilities"));
  opts.return_tokens = true;
  opts.response_fields = {"content", "timings/predicted_n", "no/such", "stop_type/x"};
  f = native_final_json(r, opts);
  EXPECT_EQ(f, json({{"content", "a\nb"}, {"timings/predicted_n", 0}}));
  opts.response_fields = {"tokens"};
  EXPECT_EQ(native_final_json(r, opts), json({{"tokens", {5, 6}}}));
}

TEST(LlamaResponse, CompletionProbabilities) {
  const Tokenizer& tok = *stories_tokenizer();
  SampleResult s;
  s.token = 300;
  s.logprob = -0.5f;
  s.top = {{300, -0.5f}, {301, -1.5f}, {302, -2.5f}};
  const json p = native_probs_json(tok, {300}, {s}, 2);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["id"], 300);
  EXPECT_EQ(p[0]["token"], tok.token_to_piece(300));
  EXPECT_FLOAT_EQ(p[0]["logprob"].get<float>(), -0.5f);
  ASSERT_EQ(p[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(p[0]["top_logprobs"][1]["id"], 301);
  EXPECT_EQ(p[0]["top_logprobs"][1]["bytes"].size(), tok.token_to_piece(301).size());
  s.logprob = -INFINITY;  // JSON has no -inf
  EXPECT_EQ(native_probs_json(tok, {300}, {s}, 0)[0]["logprob"], -9999.0);
}

namespace {

using test::qwen3_tokenizer;

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

TEST(LlamaInfill, RepoLevelFimPromptOfTheModelsTokens) {
  const Tokenizer& tok = *qwen3_tokenizer();
  ASSERT_GE(tok.fim_pre_id(), 0);
  ASSERT_GE(tok.fim_rep_id(), 0);
  ASSERT_GE(tok.fim_sep_id(), 0);
  EXPECT_EQ(tok.token_to_piece(tok.fim_pre_id()), "<|fim_prefix|>");
  EXPECT_EQ(tok.token_to_piece(tok.fim_rep_id()), "<|repo_name|>");
  auto ids = [&](const std::string& s) { return tok.encode(s, false, false); };
  const json body = {{"input_prefix", "def add(a, b):\n    return"},
                     {"input_suffix", "\n\nprint(add(1, 2))\n"},
                     {"input_extra", {{{"filename", "util.py"}, {"text", "import math\n"}}, {{"text", "x = 1\n"}}}},
                     {"prompt", " a"}};
  const std::vector<int32_t> got = infill_prompt(body, tok, 4096, 64);
  const std::vector<int32_t> want =
      cat({{tok.fim_rep_id()}, ids("myproject\n"), {tok.fim_sep_id()}, ids("util.py\n"), ids("import math\n"),
           {tok.fim_sep_id()}, ids("tmp\n"), ids("x = 1\n"), {tok.fim_sep_id()}, ids("filename\n"), {tok.fim_pre_id()},
           ids("def add(a, b):\n    return"), tok.encode(" a", false, true), {tok.fim_suf_id()},
           ids("\n\nprint(add(1, 2))\n"), {tok.fim_mid_id()}});
  EXPECT_EQ(got, want);
  // special-token text inside the code stays text
  const auto guarded = infill_prompt({{"input_prefix", "<|fim_middle|>"}, {"input_suffix", ""}}, tok, 4096, 0);
  EXPECT_EQ(std::count(guarded.begin(), guarded.end(), tok.fim_mid_id()), 1);
}

TEST(LlamaInfill, LongInputsKeepThePrefixEndAndTheSuffixStart) {
  const Tokenizer& tok = *qwen3_tokenizer();
  std::string prefix, suffix;
  for (int i = 0; i < 200; ++i) prefix += "p" + std::to_string(i) + " ";
  for (int i = 0; i < 200; ++i) suffix += "s" + std::to_string(i) + " ";
  const auto pre = tok.encode(prefix, false, false), suf = tok.encode(suffix, false, false);
  // a context of 128: a batch of 64, so the prefix's last 48 tokens and the suffix's first 14 (16 - 2)
  const std::vector<int32_t> got = infill_prompt(
      {{"input_prefix", prefix}, {"input_suffix", suffix}, {"input_extra", {{{"text", std::string(2000, 'x')}}}}}, tok,
      128, 16);
  const auto at_pre = std::find(got.begin(), got.end(), tok.fim_pre_id());
  const auto at_suf = std::find(got.begin(), got.end(), tok.fim_suf_id());
  ASSERT_NE(at_pre, got.end());
  ASSERT_NE(at_suf, got.end());
  EXPECT_EQ(std::vector<int32_t>(at_pre + 1, at_suf), std::vector<int32_t>(pre.end() - 48, pre.end()));
  EXPECT_EQ(std::vector<int32_t>(at_suf + 1, got.end() - 1), std::vector<int32_t>(suf.begin(), suf.begin() + 14));
  EXPECT_EQ(got.back(), tok.fim_mid_id());
  // the extra files fill 128 - 64 - 2 * 16 = 32 tokens, their end
  EXPECT_EQ(at_pre - got.begin(), 32);
  EXPECT_LE(got.size(), 128u);
}

TEST(LlamaInfill, RefusalsNameTheProblem) {
  const Tokenizer& qwen = *qwen3_tokenizer();
  auto err = [&](const json& body, const Tokenizer& tok) {
    try {
      infill_prompt(body, tok, 512, 0);
    } catch (const RequestError& e) {
      return e.error;
    }
    ADD_FAILURE() << "accepted " << body.dump();
    return ApiError{};
  };
  const ApiError none = err({{"input_prefix", "a"}, {"input_suffix", "b"}}, *stories_tokenizer());
  EXPECT_EQ(none.status, 501);
  EXPECT_NE(none.message.find("prefix token is missing"), std::string::npos);
  EXPECT_EQ(err({{"input_suffix", "b"}}, qwen).param, "input_prefix");
  EXPECT_EQ(err({{"input_prefix", "a"}}, qwen).param, "input_suffix");
  EXPECT_EQ(err({{"input_prefix", 5.5}, {"input_suffix", "b"}}, qwen).param, "input_prefix");
  EXPECT_EQ(err({{"input_prefix", "a"}, {"input_suffix", "b"}, {"input_extra", "x"}}, qwen).param, "input_extra");
  EXPECT_EQ(err({{"input_prefix", "a"}, {"input_suffix", "b"}, {"input_extra", {{{"filename", "f"}}}}}, qwen).param,
            "input_extra");
  EXPECT_EQ(err({{"input_prefix", "a"}, {"input_suffix", "b"}, {"prompt", 1}}, qwen).param, "prompt");
}

TEST(LlamaRequest, NativeStopsIndentAndTime) {
  NativeOptions o;
  o.n_indent = 4;
  // the first line continues the caller's line; later lines must keep the indentation
  EXPECT_FALSE(native_stop("x = 1", o, 5));
  EXPECT_FALSE(native_stop("x = 1\n    y = 2\n", o, 5));
  EXPECT_FALSE(native_stop("x = 1\n    y = 2\n\n    z", o, 5));  // a blank line is not a dedent
  EXPECT_FALSE(native_stop("x = 1\n  ", o, 5));                    // indentation still coming
  EXPECT_EQ(native_stop("x = 1\n    y = 2\n  return", o, 5), std::optional<size_t>(18));  // cut before "return"
  EXPECT_EQ(native_stop("x\nprint()", o, 5), std::optional<size_t>(2));
  EXPECT_EQ(native_stop("x\n\tt\n", o, 5), std::optional<size_t>(3));  // a tab counts one
  // the time limit ends a text that holds a newline, once it has passed
  NativeOptions t;
  t.t_max_predict_ms = 100;
  EXPECT_FALSE(native_stop("no newline yet", t, 500));
  EXPECT_FALSE(native_stop("a\nb", t, 99));
  EXPECT_FALSE(native_stop("a\nb", t, -1));
  EXPECT_EQ(native_stop("a\nb", t, 100), std::optional<size_t>(3));
  EXPECT_FALSE(native_stop("a\nb", NativeOptions{}, 1e9));  // neither set
  // both fields are mapped (and no longer refused)
  const MappedRequest m = native_ok({{"prompt", "Once"}, {"n_indent", 4}, {"t_max_predict_ms", 250}, {"t_max_prompt_ms", 500}});
  EXPECT_EQ(m.native.n_indent, 4);
  EXPECT_EQ(m.native.t_max_predict_ms, 250);
  EXPECT_EQ(m.native.generation_settings["n_indent"], 4);
  EXPECT_EQ(native_err({{"prompt", "Once"}, {"n_indent", -1}}).param, "n_indent");
}

// /v1/completions' suffix (OpenAI's insertion) through the model's FIM tokens.
TEST(LlamaInfill, CompletionsSuffixIsAFimPrompt) {
  ServerContext c = context();
  c.tokenizer = qwen3_tokenizer();
  c.n_vocab = c.tokenizer->n_vocab();
  c.max_model_len = 256;
  const Tokenizer& tok = *c.tokenizer;
  ApiError err;
  auto m = map_completion_request({{"prompt", "def add(a, b):\n    return"}, {"suffix", "\n\nprint(add(1, 2))"},
                                   {"max_tokens", 8}},
                                  c, &err);
  ASSERT_TRUE(m.ok()) << m.error();
  const std::vector<int32_t> want = cat({{tok.fim_pre_id()}, tok.encode("def add(a, b):\n    return", true, true),
                                         {tok.fim_suf_id()}, tok.encode("\n\nprint(add(1, 2))", false, false),
                                         {tok.fim_mid_id()}});
  EXPECT_EQ(m->prompts.at(0).request.prompt, want);
  // an empty suffix is a plain completion; echo with a suffix is refused
  auto plain = map_completion_request({{"prompt", "x = "}, {"suffix", ""}, {"max_tokens", 2}}, c, &err);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->prompts.at(0).request.prompt, tok.encode("x = ", true, true));
  EXPECT_FALSE(map_completion_request({{"prompt", "x"}, {"suffix", "y"}, {"echo", true}}, c, &err).ok());
  EXPECT_EQ(err.param, "echo");
}
