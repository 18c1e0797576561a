// Long inputs through the real server on stories260K (output quality is irrelevant, the mechanics
// matter): history compression writes a summary with the model and reuses it on the next turn,
// POST /v1/map_reduce runs the map batch and reduce levels (JSON and SSE progress), and
// --context-shift lets a chat generate past the context.
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>
#include <httplib.h>

#include "engine/engine.h"
#include "server/server.h"
#include "test_support.h"
#include "server_test_engine.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::unique_ptr<Engine> stories_engine(bool context_shift = false) {
  EngineConfig c = test::stories_config(2, 32);
  c.context_shift = context_shift;
  return test::make_engine(c);
}

std::unique_ptr<Server> make_server(ServerOptions o, bool context_shift = false) {
  o.http.port = 0;
  o.model_path = test::source_path("models/stories260K/stories260K.gguf");
  o.version = "test";
  auto s = Server::create(o);
  EXPECT_TRUE(s.ok()) << s.error();
  auto srv = std::move(s).value();
  EXPECT_TRUE(srv->attach_engine(stories_engine(context_shift), 0).ok());
  return srv;
}

json conversation(int turns) {
  json m = json::array({{{"role", "system"}, {"content", "You tell stories."}}});
  for (int i = 0; i < turns; ++i) {
    m.push_back({{"role", "user"}, {"content", fmt::format("Tell me about Lily and the dog number {} at the park.", i)}});
    m.push_back({{"role", "assistant"}, {"content", fmt::format("Lily and dog {} ran and played in the sun.", i)}});
  }
  m.push_back({{"role", "user"}, {"content", "What happened next?"}});
  return m;
}

json post(httplib::Client& cli, const std::string& path, const json& body, int* status = nullptr,
          httplib::Headers* headers = nullptr) {
  auto r = cli.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  if (status) *status = r->status;
  if (headers) *headers = r->headers;
  return json::parse(r->body);
}

}  // namespace

TEST(LongContextHttp, HistoryCompressionSummarizesOnceAndReusesTheSummary) {
  ServerOptions o;
  o.compression.threshold = 0.5;  // 256 of stories260K's 512 tokens
  o.compression.summary_max_tokens = 24;
  auto srv = make_server(o);
  httplib::Client cli("127.0.0.1", srv->port());
  json body = {{"messages", conversation(14)}, {"max_tokens", 8}, {"temperature", 0},
               {"context_management", {{"compress", true}}}};
  int status = 0;
  httplib::Headers headers;
  const json first = post(cli, "/v1/chat/completions", body, &status, &headers);
  ASSERT_EQ(status, 200) << first.dump();
  ASSERT_TRUE(first["usage"].contains("compression")) << first["usage"].dump();
  const json& c1 = first["usage"]["compression"];
  EXPECT_GT(c1["compressed_messages"].get<int>(), 0);
  EXPECT_EQ(c1["cached"], false);
  EXPECT_GT(c1["summary_prompt_tokens"].get<int>(), 0);
  EXPECT_GT(c1["summary_completion_tokens"].get<int>(), 0);
  EXPECT_GT(c1["saved_prompt_tokens"].get<int>(), 0);
  EXPECT_LE(first["usage"]["prompt_tokens"].get<int>(), 256);
  ASSERT_EQ(headers.count("X-Tokenmill-Compressed-Messages"), 1u);
  EXPECT_EQ(headers.find("X-Tokenmill-Compressed-Messages")->second, std::to_string(c1["compressed_messages"].get<int>()));

  // The next turn: the same history, the answer, one more question. The summary comes from the cache.
  json next = conversation(14);
  next.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
  next.push_back({{"role", "user"}, {"content", "And then?"}});
  body["messages"] = next;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto r = cli.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const size_t at = r->body.find("\"compression\"");
  ASSERT_NE(at, std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\"cached\":true", at), std::string::npos) << r->body;
  EXPECT_EQ(r->get_header_value("X-Tokenmill-Compressed-Messages"), std::to_string(c1["compressed_messages"].get<int>()));

  // Off per request: the whole history is the prompt, longer than the context.
  body = {{"messages", conversation(14)}, {"max_tokens", 8}, {"context_management", {{"compress", false}}}};
  const json off = post(cli, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(off["error"]["code"], "context_length_exceeded");
  body["context_management"] = {{"compress", 1}};
  const json bad = post(cli, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "context_management");
  srv->shutdown(5);
}

TEST(LongContextHttp, MapReduceSummarizesADocumentLongerThanTheContext) {
  auto srv = make_server({});
  httplib::Client cli("127.0.0.1", srv->port());
  cli.set_read_timeout(120);
  std::string doc;
  for (int i = 0; i < 60; ++i)
    doc += fmt::format("Once upon a time, Tim had a red ball number {}. He played with it every day in the garden.\n\n", i);
  json body = {{"document", doc}, {"max_tokens", 16}, {"chunk_tokens", 120}, {"temperature", 0}};
  int status = 0;
  const json r = post(cli, "/v1/map_reduce", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "map_reduce");
  EXPECT_GT(r["document_tokens"].get<int>(), 512);  // longer than the context
  EXPECT_GT(r["chunks"].get<int>(), 4);
  ASSERT_GE(r["stages"].size(), 2u);
  EXPECT_EQ(r["stages"][0]["stage"], "map");
  EXPECT_EQ(r["stages"][0]["inputs"], r["chunks"]);
  EXPECT_EQ(r["stages"].back()["inputs"], 1);
  int64_t prompt = 0, completion = 0;
  for (const json& s : r["stages"]) {
    prompt += s["prompt_tokens"].get<int64_t>();
    completion += s["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt);
  EXPECT_EQ(r["usage"]["completion_tokens"], completion);
  EXPECT_GT(completion, 0);

  // Streaming: progress events for every generation, then the result, then [DONE].
  body["stream"] = true;
  auto s = cli.Post("/v1/map_reduce", body.dump(), "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  EXPECT_NE(s->body.find(fmt::format("\"done\":{},\"total\":{}", r["chunks"].get<int>(), r["chunks"].get<int>())),
            std::string::npos);
  EXPECT_NE(s->body.find("\"object\":\"map_reduce\""), std::string::npos);
  EXPECT_NE(s->body.rfind("data: [DONE]"), std::string::npos);

  body = {{"max_tokens", 16}};
  EXPECT_EQ(post(cli, "/v1/map_reduce", body, &status)["error"]["param"], "document");
  EXPECT_EQ(status, 400);
  body = {{"document", doc}, {"max_tokens", 200}};  // two answers cannot fit a reduce
  post(cli, "/v1/map_reduce", body, &status);
  EXPECT_EQ(status, 400);
  srv->shutdown(5);
}

TEST(LongContextHttp, ContextShiftLetsAChatGeneratePastTheContext) {
  ServerOptions o;
  o.max_tokens_default = 700;
  auto srv = make_server(o, /*context_shift=*/true);
  httplib::Client cli("127.0.0.1", srv->port());
  cli.set_read_timeout(120);
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a story."}}})},
               {"max_tokens", 600}, {"temperature", 0}, {"ignore_eos", true}};
  int status = 0;
  const json r = post(cli, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["usage"]["completion_tokens"], 600);  // past the 512-token context
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  srv->shutdown(5);
}

// The summary is work done for the request: its tokens count against the caller's API key (tokens
// per minute, tokenmill:api_key_tokens_total) beside the answer's own.
TEST(LongContextHttp, SummaryTokensAreChargedToTheApiKey) {
  const std::string keys = test::temp_dir() + "/compress_keys.yaml";
  std::ofstream(keys) << "keys:\n  - {name: writer, key: sk-writer-0001, tokens_per_minute: 100000}\n";
  ServerOptions o;
  o.compression.threshold = 0.5;
  o.compression.summary_max_tokens = 24;
  o.api_key_file = keys;
  auto srv = make_server(o);
  httplib::Client cli("127.0.0.1", srv->port());
  json body = {{"messages", conversation(14)}, {"max_tokens", 8}, {"temperature", 0},
               {"context_management", {{"compress", true}}}};
  auto r = cli.Post("/v1/chat/completions", {{"Authorization", "Bearer sk-writer-0001"}}, body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json usage = json::parse(r->body)["usage"];
  const int64_t answer = usage["prompt_tokens"].get<int64_t>() + usage["completion_tokens"].get<int64_t>();
  const int64_t summary = usage["compression"]["summary_prompt_tokens"].get<int64_t>() +
                          usage["compression"]["summary_completion_tokens"].get<int64_t>();
  ASSERT_GT(summary, 0);
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  const std::string line = "tokenmill:api_key_tokens_total{key=\"writer\"} ";
  const size_t at = m->body.find(line);
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_EQ(std::stoll(m->body.substr(at + line.size())), answer + summary);
}
