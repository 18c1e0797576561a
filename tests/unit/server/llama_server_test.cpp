// llama-server's own routes over loopback on stories260K (routes_llama.cpp, llama_request.h,
// llama_response.h): /completion's result and stream against /v1/completions' greedy text, several
// prompts, n_predict 0, n_probs, /props, /slots, /apply-template, /tokenize "content", the spellings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include <httplib.h>

#include "engine/engine.h"
#include "server/server.h"
#include "server_http_client.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::unique_ptr<Server> make_server(int max_num_seqs = 8, bool slots = true) {
  ServerOptions o;
  o.slots_endpoint = slots;
  return test::stories_server(o, max_num_seqs);
}

std::string expected_greedy() {
  std::ifstream f(test::source_path("models/stories260K/expected_greedy_200.txt"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(LlamaServer, CompletionIsTheGreedyTextInLlamaServersShape) {
  auto srv = make_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json r = test::post_json(cli, "/completion",
                      {{"prompt", "Once upon a time"}, {"n_predict", 24}, {"temperature", 0}, {"return_tokens", true}},
                      &status);
  ASSERT_EQ(status, 200) << r.dump();
  const std::string want = expected_greedy();
  EXPECT_EQ("Once upon a time" + r["content"].get<std::string>(),
            want.substr(0, 16 + r["content"].get<std::string>().size()));
  EXPECT_EQ(r["stop"], true);
  EXPECT_EQ(r["model"], "stories260K");
  EXPECT_EQ(r["tokens_predicted"], 24);
  EXPECT_EQ(r["tokens"].size(), 24u);
  EXPECT_EQ(r["stop_type"], "limit");
  EXPECT_EQ(r["prompt"], "Once upon a time");
  EXPECT_EQ(r["id_slot"], -1);
  const json& t = r["timings"];
  EXPECT_EQ(t["predicted_n"], 24);
  EXPECT_EQ(t["prompt_n"].get<int64_t>() + t["cache_n"].get<int64_t>(), r["tokens_evaluated"].get<int64_t>());
  EXPECT_GT(t["prompt_ms"].get<double>(), 0.0);
  EXPECT_GT(t["predicted_per_second"].get<double>(), 0.0);
  EXPECT_EQ(r["generation_settings"]["n_predict"], 24);
  EXPECT_EQ(r["generation_settings"]["temperature"], 0.0);
  // the same text as /v1/completions and the /completions spelling
  const json oai = test::post_json(cli, "/v1/completions",
                        {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r["content"], oai["choices"][0]["text"]);
  const json again = test::post_json(cli, "/completions", {{"prompt", "Once upon a time"}, {"n_predict", 24}, {"temperature", 0}},
                          &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(again["content"], r["content"]);
  // a stop string
  const json word = test::post_json(cli, "/completion",
                         {{"prompt", "Once upon a time"}, {"n_predict", 40}, {"temperature", 0}, {"stop", {"Lily"}}},
                         &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(word["stop_type"], "word");
  EXPECT_EQ(word["stopping_word"], "Lily");
  EXPECT_EQ(word["content"], ", there was a little girl named ");
  // refused sampler: a 400 naming it
  const json bad = test::post_json(cli, "/completion", {{"prompt", "x"}, {"mirostat", 1}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "mirostat");
  srv->shutdown(5);
}

TEST(LlamaServer, StreamCarriesTheTextThenTheFinalResultWithoutDone) {
  auto srv = make_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json whole =
      test::post_json(cli, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 16}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  auto r = cli.Post("/completion",
                    json({{"prompt", "Once upon a time"},
                          {"n_predict", 16},
                          {"temperature", 0},
                          {"stream", true},
                          {"n_probs", 2},
                          {"timings_per_token", true}})
                        .dump(),
                    "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  bool done = false;
  const std::vector<json> ev = test::data_events(r->body, &done);
  EXPECT_FALSE(done);  // llama-server's native stream has no [DONE]
  ASSERT_GE(ev.size(), 2u);
  std::string text;
  int64_t tokens = 0;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["stop"], false);
    text += ev[i]["content"].get<std::string>();
    tokens += static_cast<int64_t>(ev[i]["tokens"].size());
    EXPECT_EQ(ev[i]["tokens_predicted"], tokens);
    EXPECT_EQ(ev[i]["completion_probabilities"].size(), ev[i]["tokens"].size());
    EXPECT_EQ(ev[i]["completion_probabilities"][0]["top_logprobs"].size(), 2u);
    EXPECT_TRUE(ev[i].contains("timings"));
  }
  EXPECT_EQ(text, whole["content"]);
  EXPECT_EQ(tokens, 16);
  const json& last = ev.back();
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["content"], "");
  EXPECT_EQ(last["tokens_predicted"], 16);
  EXPECT_EQ(last["stop_type"], "limit");
  EXPECT_FALSE(last.contains("completion_probabilities"));  // the chunks carried them
  srv->shutdown(5);
}

TEST(LlamaServer, SeveralPromptsNPredictZeroAndProbabilities) {
  auto srv = make_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json one = test::post_json(cli, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 6}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  // several prompts: an array of results by index, the same texts as asked alone
  const json many = test::post_json(cli, "/completion",
                         {{"prompt", json::array({"Lily went", "Once upon a time"})},
                          {"n_predict", 6},
                          {"temperature", 0},
                          {"response_fields", {"index", "content", "prompt"}}},
                         &status);
  ASSERT_EQ(status, 200) << many.dump();
  ASSERT_TRUE(many.is_array());
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(many[1], json({{"index", 1}, {"content", one["content"]}, {"prompt", "Once upon a time"}}));
  EXPECT_EQ(many[0]["index"], 0);
  // n_predict 0: the prompt is evaluated, nothing returned
  const json warm = test::post_json(cli, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 0}}, &status);
  ASSERT_EQ(status, 200) << warm.dump();
  EXPECT_EQ(warm["content"], "");
  EXPECT_EQ(warm["tokens_predicted"], 0);
  EXPECT_EQ(warm["stop_type"], "limit");
  EXPECT_EQ(warm["timings"]["predicted_n"], 0);
  // n_probs: the chosen token first among its alternatives under greedy
  const json p = test::post_json(cli, "/completion",
                      {{"prompt", "Once upon a time"}, {"n_predict", 3}, {"temperature", 0}, {"n_probs", 3}}, &status);
  ASSERT_EQ(status, 200);
  ASSERT_EQ(p["completion_probabilities"].size(), 3u);
  for (const json& e : p["completion_probabilities"]) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["id"], e["id"]);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
  }
  srv->shutdown(5);
}

TEST(LlamaServer, PropsSlotsTemplateTokenizeAndSpellings) {
  auto srv = make_server(/*max_num_seqs=*/4);
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  auto props = cli.Get("/props");
  ASSERT_TRUE(props);
  ASSERT_EQ(props->status, 200);
  const json pj = json::parse(props->body);
  EXPECT_EQ(pj["total_slots"], 4);
  EXPECT_EQ(pj["default_generation_settings"]["n_ctx"], 512);
  EXPECT_NEAR(pj["default_generation_settings"]["params"]["temperature"].get<double>(), 0.8, 1e-6);
  EXPECT_EQ(pj["default_generation_settings"]["params"]["top_k"], 40);
  EXPECT_EQ(pj["default_generation_settings"]["params"]["n_predict"], -1);
  EXPECT_EQ(pj["model_alias"], "stories260K");
  EXPECT_EQ(pj["build_info"], "tokenmill test");
  EXPECT_EQ(pj["modalities"]["vision"], false);
  EXPECT_FALSE(pj["chat_template"].get<std::string>().empty());
  auto slots = cli.Get("/slots");
  ASSERT_TRUE(slots);
  ASSERT_EQ(slots->status, 200);
  const json sj = json::parse(slots->body);
  ASSERT_EQ(sj.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sj[i]["id"], i);
    EXPECT_EQ(sj[i]["is_processing"], false);  // idle server
  }
  const json act = test::post_json(cli, "/slots/0?action=save", {{"filename", "x.bin"}}, &status);
  EXPECT_EQ(status, 501);
  EXPECT_EQ(act["error"]["type"], "not_supported_error");
  // /apply-template: the prompt /v1/chat/completions would generate from
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  const json at = test::post_json(cli, "/apply-template", {{"messages", msgs}}, &status);
  ASSERT_EQ(status, 200) << at.dump();
  EXPECT_EQ(at["prompt"], "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");  // the model's ChatML
  const json tk = test::post_json(cli, "/tokenize", {{"prompt", at["prompt"]}, {"add_special_tokens", false}}, &status);
  ASSERT_EQ(status, 200);
  const json tm = test::post_json(cli, "/tokenize", {{"messages", msgs}}, &status);
  ASSERT_EQ(status, 200);
  ASSERT_GE(tm["tokens"].size(), tk["tokens"].size());  // the chat route's ids end with the template's text
  EXPECT_EQ(json(std::vector<json>(tm["tokens"].end() - static_cast<std::ptrdiff_t>(tk["tokens"].size()), tm["tokens"].end())),
            tk["tokens"]);
  const json back = test::post_json(cli, "/detokenize", {{"tokens", json::array({1, 403})}}, &status);
  EXPECT_EQ(back["content"], back["prompt"]);  // llama-server's name beside vLLM's
  EXPECT_FALSE(back["content"].get<std::string>().empty());
  // /tokenize with llama-server's "content": no BOS unless add_special; pieces on request
  const json plain = test::post_json(cli, "/tokenize", {{"content", "Once upon"}}, &status);
  ASSERT_EQ(status, 200) << plain.dump();
  const json vllm = test::post_json(cli, "/tokenize", {{"prompt", "Once upon"}, {"add_special_tokens", false}}, &status);
  EXPECT_EQ(plain["tokens"], vllm["tokens"]);
  const json bos = test::post_json(cli, "/tokenize", {{"content", "Once upon"}, {"add_special", true}}, &status);
  EXPECT_EQ(bos["tokens"].size(), plain["tokens"].size() + 1);
  EXPECT_EQ(bos["tokens"][0], 1);
  const json pieces = test::post_json(cli, "/tokenize", {{"content", json::array({1, "Once upon"})}, {"with_pieces", true}}, &status);
  ASSERT_EQ(status, 200) << pieces.dump();
  ASSERT_EQ(pieces["tokens"].size(), plain["tokens"].size() + 1);
  EXPECT_EQ(pieces["tokens"][0]["id"], 1);
  EXPECT_EQ(pieces["tokens"][1]["id"], plain["tokens"][0]);
  EXPECT_EQ(pieces["tokens"][1]["piece"], " Once");
  // the other spellings llama-server's clients use
  auto health = cli.Get("/v1/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto models = cli.Get("/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "stories260K");
  const json chat = test::post_json(cli, "/chat/completions", {{"messages", msgs}, {"max_tokens", 3}}, &status);
  EXPECT_EQ(status, 200) << chat.dump();
  EXPECT_EQ(chat["object"], "chat.completion");
  srv->shutdown(5);
}

// --no-slots (llama-server's): GET /slots answers 501 naming the flag.
TEST(LlamaServer, NoSlotsTurnsTheSlotsRouteOff) {
  auto srv = make_server(4, /*slots=*/false);
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  auto r = cli.Get("/slots");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501);
  EXPECT_NE(r->body.find("--no-slots"), std::string::npos) << r->body;
  srv->shutdown(5);
}

// n_indent (a dedented line ends the text) and /infill: 501 without FIM tokens; with them (a dummy
// coder vocabulary, `tokenmill dummy --fim`), the model's FIM prompt, whole and streamed.
TEST(LlamaServer, NIndentAndInfill) {
  auto srv = make_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  // greedy: ", there was ... too high.\nLily's mom said" -- the line after the newline is not indented
  const json cut = test::post_json(cli, "/completion",
                        {{"prompt", "Once upon a time"}, {"n_predict", 120}, {"temperature", 0}, {"n_indent", 1}}, &status);
  ASSERT_EQ(status, 200) << cut.dump();
  const std::string want = expected_greedy();
  const std::string text = cut["content"];
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ("Once upon a time" + text, want.substr(0, 16 + text.size()));
  EXPECT_EQ(cut["stop_type"], "limit");
  // the same request streamed ends with the final result
  auto sr = cli.Post("/completion",
                     json({{"prompt", "Once upon a time"}, {"n_predict", 120}, {"temperature", 0}, {"n_indent", 1},
                           {"stream", true}})
                         .dump(),
                     "application/json");
  ASSERT_TRUE(sr);
  bool done = false;
  const auto ev = test::data_events(sr->body, &done);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back()["stop"], true);
  EXPECT_EQ(ev.back()["stop_type"], "limit");
  std::string streamed;
  for (size_t i = 0; i + 1 < ev.size(); ++i) streamed += ev[i]["content"].get<std::string>();
  EXPECT_EQ(streamed.substr(0, text.size()), text);  // (the token that showed the dedent may have been sent)
  // no FIM tokens in stories260K's vocabulary
  const json no = test::post_json(cli, "/infill", {{"input_prefix", "def f("}, {"input_suffix", ")"}}, &status);
  EXPECT_EQ(status, 501) << no.dump();
  EXPECT_EQ(no["error"]["type"], "not_supported_error");
  srv->shutdown(5);

  const std::string coder = test::temp_dir() + "/fim-coder.gguf";
  auto w = test::run_command(test::tokenmill_binary() + " dummy --shape tiny-qwen3 --fim --dtype F32 -o " + coder);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  ServerOptions o;
  o.http.port = 0;
  o.model_path = coder;
  auto s = Server::create(o);
  ASSERT_TRUE(s.ok()) << s.error();
  EngineConfig c;
  c.model_path = coder;
  c.threads = 1;
  ASSERT_TRUE((*s)->attach_engine(test::make_engine(c), 0).ok());
  httplib::Client fc("127.0.0.1", (*s)->port());
  const json body = {{"input_prefix", "def f(x):\n    return"},
                     {"input_suffix", "\n\nprint(f(2))\n"},
                     {"input_extra", {{{"filename", "util.py"}, {"text", "import os\n"}}}},
                     {"prompt", " x"},
                     {"n_predict", 6},
                     {"temperature", 0},
                     {"return_tokens", true}};
  const json r = test::post_json(fc, "/infill", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const std::string p = r["prompt"];
  size_t at = 0;
  for (const char* part : {"<|repo_name|>", "myproject", "<|file_sep|>", "util.py", "import", "<|file_sep|>", "filename",
                           "<|fim_prefix|>", "def", "return", "x", "<|fim_suffix|>", "print", "<|fim_middle|>"}) {
    const size_t next = p.find(part, at);
    ASSERT_NE(next, std::string::npos) << part << " in " << p;
    at = next + std::strlen(part);
  }
  EXPECT_EQ(p.size(), at);  // the prompt ends with <|fim_middle|>
  EXPECT_LE(r["tokens_predicted"].get<int64_t>(), 6);
  // streamed: the same tokens
  json sb = body;
  sb["stream"] = true;
  auto st = fc.Post("/infill", sb.dump(), "application/json");
  ASSERT_TRUE(st);
  const auto sev = test::data_events(st->body, &done);
  std::vector<int32_t> toks;
  for (const json& e : sev)
    if (!e["stop"].get<bool>())
      for (const json& t : e["tokens"]) toks.push_back(t.get<int32_t>());
  EXPECT_EQ(json(toks), r["tokens"]);
  EXPECT_EQ(test::post_json(fc, "/infill", {{"input_suffix", "x"}}, &status)["error"]["param"], "input_prefix");
  EXPECT_EQ(status, 400);
  (*s)->shutdown(5);
}
