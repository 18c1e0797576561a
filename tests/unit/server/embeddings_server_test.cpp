// /v1/embeddings, /v1/rerank and /v1/score over loopback on tiny random models written by
// `tokenmill dummy` (a bert embedder, a bert reranker, a Qwen3-Reranker, a generation model): shapes,
// normalization, base64, Matryoshka dimensions, usage, ordering, the rerank prompt template, and the 400s.
#include <gtest/gtest.h>

#include <httplib.h>

#include <cmath>
#include <cstring>

#include "engine/engine.h"
#include "server/embed_request.h"
#include "server/server.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::string dummy(const std::string& args, const std::string& name) {
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  auto r = test::run_command(test::tokenmill_binary() + " dummy --dtype F32 --seed 3 " + args + " -o " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}
const std::string& embedder() {
  static const std::string p = dummy("--shape tiny-bert --pooling mean", "srv-emb-bert");
  return p;
}
const std::string& reranker() {
  static const std::string p = dummy("--shape tiny-bert --pooling rank", "srv-emb-rank");
  return p;
}
const std::string& generator() {
  static const std::string p = dummy("--shape tiny-qwen3", "srv-emb-gen");
  return p;
}

const std::string& qwen3_reranker() {
  static const std::string p = dummy("--shape tiny-qwen3-reranker", "srv-emb-qwen3-rerank");
  return p;
}

std::unique_ptr<Server> make_server(const std::string& path, const std::string& pooling = "") {
  ServerOptions o;
  o.http.port = 0;
  o.model_path = path;
  o.version = "test";
  auto s = Server::create(o);
  EXPECT_TRUE(s.ok()) << s.error();
  if (!s.ok()) return nullptr;
  EngineConfig c;
  c.model_path = path;
  c.threads = 1;
  c.pooling = pooling;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  if (!e.ok()) return nullptr;
  EXPECT_TRUE((*s)->attach_engine(std::move(e).value(), 0).ok());
  return std::move(s).value();
}

json post(httplib::Client& cli, const std::string& path, const json& body, int* status) {
  auto r = cli.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  *status = r->status;
  return json::parse(r->body);
}

double norm(const json& v) {
  double s = 0;
  for (const json& x : v) s += x.get<double>() * x.get<double>();
  return std::sqrt(s);
}

std::vector<float> from_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < s.size(); i += 4) {
    uint32_t x = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const int v = val(s[i + k]);
      if (v < 0) ++pad;
      x = (x << 6) | static_cast<uint32_t>(v < 0 ? 0 : v);
    }
    for (int k = 0; k < 3 - pad; ++k) bytes += static_cast<char>((x >> (16 - 8 * k)) & 0xff);
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

TEST(EmbeddingsServer, InputShapesNormalizationBase64AndDimensions) {
  auto srv = make_server(embedder());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  json one = post(cli, "/v1/embeddings", {{"input", "hello world"}}, &status);
  ASSERT_EQ(status, 200) << one.dump();
  EXPECT_EQ(one["object"], "list");
  ASSERT_EQ(one["data"].size(), 1u);
  EXPECT_EQ(one["data"][0]["object"], "embedding");
  EXPECT_EQ(one["data"][0]["index"], 0);
  const json& v = one["data"][0]["embedding"];
  ASSERT_EQ(v.size(), 64u);
  EXPECT_NEAR(norm(v), 1.0, 1e-5);
  EXPECT_EQ(one["usage"]["prompt_tokens"], 4);  // [CLS] hello world [SEP]
  EXPECT_EQ(one["usage"]["total_tokens"], 4);
  // the same text as token ids, inside a batch of several inputs
  auto tok = Tokenizer::load(embedder());
  ASSERT_TRUE(tok.ok());
  const auto ids = (*tok)->encode("hello world", true, true);
  json many = post(cli, "/v1/embeddings", {{"input", json::array({"the cat", ids, "a dog is fast"})}}, &status);
  ASSERT_EQ(status, 200) << many.dump();
  ASSERT_EQ(many["data"].size(), 3u);
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(many["data"][1]["embedding"][i].get<double>(), v[i].get<double>(), 1e-4);
  json as_ids = post(cli, "/v1/embeddings", {{"input", ids}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(as_ids["data"].size(), 1u);
  // base64: the same floats
  json b64 = post(cli, "/v1/embeddings", {{"input", "hello world"}, {"encoding_format", "base64"}}, &status);
  ASSERT_EQ(status, 200);
  auto floats = from_base64(b64["data"][0]["embedding"].get<std::string>());
  ASSERT_EQ(floats.size(), 64u);
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(floats[i], v[i].get<double>(), 1e-6);
  // dimensions: the first 16, normalized again
  json dims = post(cli, "/v1/embeddings", {{"input", "hello world"}, {"dimensions", 16}}, &status);
  ASSERT_EQ(status, 200);
  const json& d = dims["data"][0]["embedding"];
  ASSERT_EQ(d.size(), 16u);
  EXPECT_NEAR(norm(d), 1.0, 1e-5);
  const double scale = d[0].get<double>() / v[0].get<double>();
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(d[i].get<double>(), v[i].get<double>() * scale, 1e-5);
  // /v1/models lists it
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"].size(), 1u);
  srv->shutdown(5);
}

TEST(EmbeddingsServer, BadRequestsAnswer400NamingTheField) {
  auto srv = make_server(embedder());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  struct Case {
    json body;
    const char* param;
  };
  const Case cases[] = {
      {json::object(), "input"},
      {{{"input", 5}}, "input"},
      {{{"input", ""}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", json::array({"a", 3})}}, "input"},
      {{{"input", json::array({1, 99999})}}, "input"},
      {{{"input", json::array({json::array()})}}, "input"},
      {{{"input", "x"}, {"encoding_format", "int8"}}, "encoding_format"},
      {{{"input", "x"}, {"dimensions", 65}}, "dimensions"},
      {{{"input", "x"}, {"dimensions", 0}}, "dimensions"},
  };
  for (const Case& c : cases) {
    int status = 0;
    json r = post(cli, "/v1/embeddings", c.body, &status);
    EXPECT_EQ(status, 400) << c.body.dump() << " -> " << r.dump();
    EXPECT_EQ(r["error"]["param"], c.param) << c.body.dump() << " -> " << r.dump();
  }
  // too long for the model's context (128 positions)
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "hello ";
  int status = 0;
  json r = post(cli, "/v1/embeddings", {{"input", long_text}}, &status);
  EXPECT_EQ(status, 400) << r.dump();
  EXPECT_NE(r["error"]["message"].get<std::string>().find("maximum context length"), std::string::npos) << r.dump();
  // the generation routes: 400, the model does not generate
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = std::string(path) == "/v1/completions" ? json{{"prompt", "hi"}, {"max_tokens", 4}}
                                                       : json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    json g = post(cli, path, body, &status);
    EXPECT_EQ(status, 400) << path << " " << g.dump();
    EXPECT_NE(g["error"]["message"].get<std::string>().find("does not generate"), std::string::npos) << g.dump();
  }
  // not a reranker
  json rr = post(cli, "/v1/rerank", {{"query", "q"}, {"documents", {"a"}}}, &status);
  EXPECT_EQ(status, 400) << rr.dump();
  srv->shutdown(5);
}

TEST(EmbeddingsServer, RerankAndScore) {
  auto srv = make_server(reranker());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json docs = {"the cat is fast", {{"text", "hello world"}}, "a dog", "search rank query"};
  json r = post(cli, "/v1/rerank", {{"query", "cat"}, {"documents", docs}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  ASSERT_EQ(r["results"].size(), 4u);
  std::vector<double> by_index(4);
  for (size_t i = 0; i < 4; ++i) {
    const json& x = r["results"][i];
    const double s = x["relevance_score"].get<double>();
    EXPECT_GT(s, 0.0);
    EXPECT_LT(s, 1.0);
    if (i) {
      EXPECT_LE(s, r["results"][i - 1]["relevance_score"].get<double>());  // best first
    }
    by_index[x["index"].get<size_t>()] = s;
    EXPECT_TRUE(x.contains("document"));
  }
  EXPECT_EQ(r["results"][0]["document"]["text"].is_string(), true);
  EXPECT_GT(r["usage"]["total_tokens"].get<int>(), 8);
  // top_n, no documents
  json top = post(cli, "/v1/rerank", {{"query", "cat"}, {"documents", docs}, {"top_n", 2}, {"return_documents", false}}, &status);
  ASSERT_EQ(status, 200);
  ASSERT_EQ(top["results"].size(), 2u);
  EXPECT_FALSE(top["results"][0].contains("document"));
  EXPECT_EQ(top["results"][0]["index"], r["results"][0]["index"]);
  // /v1/score: the same pairs, in request order
  json sc = post(cli, "/v1/score", {{"text_1", "cat"}, {"text_2", {"the cat is fast", "hello world", "a dog", "search rank query"}}}, &status);
  ASSERT_EQ(status, 200) << sc.dump();
  ASSERT_EQ(sc["data"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sc["data"][i]["index"], i);
    EXPECT_NEAR(sc["data"][i]["score"].get<double>(), by_index[i], 1e-6);
  }
  // errors
  json bad = post(cli, "/v1/rerank", {{"documents", docs}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "query");
  bad = post(cli, "/v1/score", {{"text_1", {"a", "b"}}, {"text_2", {"a", "b", "c"}}}, &status);
  EXPECT_EQ(status, 400);
  bad = post(cli, "/v1/embeddings", {{"input", "x"}}, &status);
  EXPECT_EQ(status, 400) << bad.dump();
  srv->shutdown(5);
}

TEST(EmbeddingsServer, GenerationModelRefusesEmbeddings) {
  auto srv = make_server(generator());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  json r = post(cli, "/v1/embeddings", {{"input", "hi"}}, &status);
  EXPECT_EQ(status, 400) << r.dump();
  EXPECT_EQ(r["error"]["param"], "model");
  srv->shutdown(5);
}

TEST(EmbeddingsServer, Base64MatchesLittleEndianFloats) {
  EXPECT_EQ(base64_floats({1.0f}), "AACAPw==");
  EXPECT_EQ(base64_floats({}), "");
  EXPECT_EQ(base64_floats({1.0f, -2.0f}), "AACAPwAAAMA=");
}

// A Qwen3-Reranker: the pair prompt is the GGUF's rerank template with {query} and {document}
// replaced, tokenized with special tokens and no BOS (llama-server's format_prompt_rerank); the
// score is the model's softmax output[0] as is. The same weights as a generation model served with
// --pooling rank score the same.
TEST(EmbeddingsServer, Qwen3RerankerTemplateAndScores) {
  EngineConfig c;
  c.model_path = qwen3_reranker();
  c.threads = 1;
  auto engine = Engine::create(c);
  ASSERT_TRUE(engine.ok()) << engine.error();
  std::unique_ptr<Engine> eng = std::move(engine).value();
  const ModelInfo& info = eng->model_info();
  EXPECT_EQ(info.pooling, "rank");
  EXPECT_TRUE(info.rank_softmax);
  EXPECT_EQ(info.embedding_dim, 2);
  EXPECT_EQ(info.rerank_template, tmill::tok::kQwen3RerankTemplate);
  const Tokenizer& tok = *eng->tokenizer();
  const std::vector<std::string> docs = {"the cat is fast", "hello world {query}"};
  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& d : docs) {
    std::string prompt = tmill::tok::kQwen3RerankTemplate;
    prompt.replace(prompt.find("{query}"), 7, "cat");
    prompt.replace(prompt.find("{document}"), 10, d);
    auto ids = rerank_pair_tokens(tok, "cat", d, info.rerank_template);
    EXPECT_EQ(ids, tok.encode(prompt, false, true));
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], tok.find_token("<|im_start|>").value_or(-1));  // a special token, no BOS before it
    inputs.push_back(std::move(ids));
  }
  auto outs = eng->embed(inputs);
  ASSERT_TRUE(outs.ok()) << outs.error();
  std::vector<double> want;
  for (const auto& o : *outs) {
    ASSERT_EQ(o.size(), 2u);
    EXPECT_NEAR(o[0] + o[1], 1.0, 1e-5);
    want.push_back(o[0]);
  }
  EXPECT_EQ(relevance_scores(*outs, true), want);
  eng.reset();

  // the model file's 'dummy --vocab' copies the reranker's tokenizer keys (its rerank template too)
  const std::string gen = dummy("--shape tiny-qwen3-reranker --pooling none --vocab " + qwen3_reranker(), "srv-emb-qwen3-rr-gen");
  for (const auto& [path, pooling] : {std::pair<std::string, std::string>{qwen3_reranker(), ""}, {gen, "rank"}}) {
    auto srv = make_server(path, pooling);
    ASSERT_TRUE(srv);
    httplib::Client cli("127.0.0.1", srv->port());
    int status = 0;
    json sc = post(cli, "/v1/score", {{"text_1", "cat"}, {"text_2", docs}}, &status);
    ASSERT_EQ(status, 200) << sc.dump();
    ASSERT_EQ(sc["data"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(sc["data"][i]["score"].get<double>(), want[i], 1e-5) << path;
    EXPECT_EQ(sc["usage"]["total_tokens"].get<size_t>(), inputs[0].size() + inputs[1].size());
    json rr = post(cli, "/v1/rerank", {{"query", "cat"}, {"documents", docs}}, &status);
    ASSERT_EQ(status, 200) << rr.dump();
    EXPECT_EQ(rr["results"][0]["index"].get<size_t>(), want[0] >= want[1] ? 0u : 1u);
    json emb = post(cli, "/v1/embeddings", {{"input", "x"}}, &status);
    EXPECT_EQ(status, 400) << emb.dump();  // a reranker
    srv->shutdown(5);
  }
  // a generation model without "yes"/"no" cannot be made a reranker
  EngineConfig g;
  g.model_path = generator();
  g.threads = 1;
  g.pooling = "rank";
  auto bad = Engine::create(g);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("yes"), std::string::npos) << bad.error();
}

// llama-server's /embedding and /embeddings: "content" (or "input") in, [{"index", "embedding":
// [vector]}] out, the same vectors as /v1/embeddings; /reranking is its spelling of /rerank.
TEST(EmbeddingsServer, LlamaServersEmbeddingRoutes) {
  auto srv = make_server(embedder());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json oai = post(cli, "/v1/embeddings", {{"input", json::array({"hello world", "the cat"})}}, &status);
  ASSERT_EQ(status, 200) << oai.dump();
  for (const char* path : {"/embedding", "/embeddings"}) {
    for (const char* key : {"content", "input"}) {
      const json nat = post(cli, path, {{key, json::array({"hello world", "the cat"})}}, &status);
      ASSERT_EQ(status, 200) << path << " " << nat.dump();
      ASSERT_TRUE(nat.is_array()) << nat.dump();
      ASSERT_EQ(nat.size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(nat[i]["index"], i);
        ASSERT_EQ(nat[i]["embedding"].size(), 1u);  // one pooled vector
        EXPECT_EQ(nat[i]["embedding"][0], oai["data"][i]["embedding"]) << path;
      }
    }
  }
  const json bad = post(cli, "/embedding", {{"content", 5}}, &status);
  EXPECT_EQ(status, 400) << bad.dump();
  srv->shutdown(5);
  auto rr = make_server(reranker());
  ASSERT_TRUE(rr);
  httplib::Client rcli("127.0.0.1", rr->port());
  const json a = post(rcli, "/rerank", {{"query", "cats"}, {"documents", {"a cat", "a car"}}}, &status);
  ASSERT_EQ(status, 200) << a.dump();
  for (const char* path : {"/reranking", "/v1/reranking"}) {
    const json b = post(rcli, path, {{"query", "cats"}, {"documents", {"a cat", "a car"}}}, &status);
    ASSERT_EQ(status, 200) << path;
    EXPECT_EQ(b["results"], a["results"]) << path;
  }
  rr->shutdown(5);
}

// Ollama's /api/embed ({"input"} -> {"embeddings": [...]}) and /api/embeddings ({"prompt"} ->
// {"embedding": [...]}): the same vectors as /v1/embeddings.
TEST(EmbeddingsServer, OllamasEmbedRoutes) {
  auto srv = make_server(embedder());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json oai = post(cli, "/v1/embeddings", {{"input", json::array({"hello world", "the cat"})}}, &status);
  ASSERT_EQ(status, 200);
  const json e = post(cli, "/api/embed", {{"model", "srv-emb-bert:latest"}, {"input", json::array({"hello world", "the cat"})}},
                      &status);
  ASSERT_EQ(status, 200) << e.dump();
  ASSERT_EQ(e["embeddings"].size(), 2u);
  EXPECT_EQ(e["embeddings"][1], oai["data"][1]["embedding"]);
  EXPECT_EQ(e["prompt_eval_count"], oai["usage"]["prompt_tokens"]);
  const json legacy = post(cli, "/api/embeddings", {{"prompt", "hello world"}}, &status);
  ASSERT_EQ(status, 200) << legacy.dump();
  EXPECT_EQ(legacy["embedding"], oai["data"][0]["embedding"]);
  const json bad = post(cli, "/api/embed", {{"input", 5}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(bad["error"].is_string());
  srv->shutdown(5);
}
