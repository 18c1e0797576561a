// The Server over real loopback HTTP (httplib client): readiness before the engine is attached,
// routing errors, body limits, API keys, a generation and a graceful shutdown.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <httplib.h>

#include "engine/engine.h"
#include "server/server.h"
#include "test_support.h"
#include "server_test_engine.h"

using namespace tmill;
using namespace tmill::server;

namespace {

using test::stories_engine;

std::unique_ptr<Server> make_server(ServerOptions o = {}) {
  o.http.port = 0;
  o.model_path = test::source_path("models/stories260K/stories260K.gguf");
  o.version = "test";
  auto s = Server::create(o);
  EXPECT_TRUE(s.ok()) << s.error();
  return std::move(s).value();
}

json body_json(const httplib::Result& r) { return json::parse(r->body); }

}  // namespace

TEST(ServerHttp, HealthIs503UntilTheEngineIsAttached) {
  auto srv = make_server();
  httplib::Client cli("127.0.0.1", srv->port());
  auto h = cli.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(body_json(h)["error"]["code"], "model_loading");
  EXPECT_EQ(h->get_header_value("Retry-After"), "5");
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 503);
  auto metrics = cli.Get("/metrics");  // scrapeable while loading
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("tokenmill:model_loaded{model_name=\"stories260K\"} 0"), std::string::npos);

  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0.5).ok());
  h = cli.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  const json m = body_json(models);
  EXPECT_EQ(m["data"][0]["id"], "stories260K");
  EXPECT_EQ(m["data"][0]["max_model_len"], 512);
  EXPECT_EQ(cli.Get("/v1/models/stories260K")->status, 200);
  EXPECT_EQ(body_json(cli.Get("/v1/models/other"))["error"]["code"], "model_not_found");
  EXPECT_EQ(body_json(cli.Get("/version"))["version"], "test");
  // the memory plan by device (the CPU here: no GPU series)
  const std::string scraped = cli.Get("/metrics")->body;
  for (const char* name : {"tokenmill:weight_memory_bytes", "tokenmill:kv_cache_memory_bytes"}) {
    const std::string line = std::string(name) + "{model_name=\"stories260K\",device=\"cpu\"} ";
    const size_t at = scraped.find(line);
    ASSERT_NE(at, std::string::npos) << name << "\n" << scraped;
    EXPECT_GT(std::stod(scraped.substr(at + line.size())), 0.0) << name;
  }
  EXPECT_EQ(scraped.find("tokenmill:gpu_utilization_ratio"), std::string::npos);
  srv->shutdown(5);
}

// An engine on a GPU backend -- here the CUDA kernels on the CPU's emulator of CUDA (--device
// cuda-emu), the path --device cuda takes on a GPU -- answers with stories260K's greedy text and
// exports its memory plan by device: weights and KV cache, the device's memory and the budget
// --gpu-memory-utilization gives it. (The NVML series need a real driver and are left out here.)
TEST(ServerHttp, AGpuEngineAnswersAndExportsItsMemoryPlan) {
  auto srv = make_server();
  EngineConfig c = test::stories_config();
  c.device = "cuda-emu";
  c.gpu_memory_utilization = 0.5;
  auto engine = test::make_engine(c);
  ASSERT_NE(engine, nullptr);
  const uint64_t total = engine->memory_plan().device_total_bytes;
  ASSERT_GT(total, 0u);
  ASSERT_TRUE(srv->attach_engine(std::move(engine), 0.5).ok());
  httplib::Client cli("127.0.0.1", srv->port());
  cli.set_read_timeout(120);  // (the emulator under AddressSanitizer takes seconds per token)
  auto r = cli.Post("/v1/completions", R"({"model":"stories260K","prompt":"","max_tokens":24,"temperature":0})",
                    "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::ifstream f(test::source_path("models/stories260K/expected_greedy_200.txt"));
  const std::string expected((std::istreambuf_iterator<char>(f)), {});
  const std::string text = body_json(r)["choices"][0]["text"];
  ASSERT_GT(text.size(), 16u);
  EXPECT_EQ(expected.substr(0, text.size()), text);
  const std::string scraped = cli.Get("/metrics")->body;
  auto value = [&](const std::string& line) {
    const size_t at = scraped.find(line);
    EXPECT_NE(at, std::string::npos) << line << "\n" << scraped;
    return at == std::string::npos ? -1.0 : std::stod(scraped.substr(at + line.size()));
  };
  EXPECT_GT(value("tokenmill:weight_memory_bytes{model_name=\"stories260K\",device=\"cuda-emu\"} "), 0.0);
  EXPECT_GT(value("tokenmill:kv_cache_memory_bytes{model_name=\"stories260K\",device=\"cuda-emu\"} "), 0.0);
  EXPECT_EQ(value("tokenmill:gpu_memory_total_bytes{model_name=\"stories260K\"} "), static_cast<double>(total));
  EXPECT_EQ(value("tokenmill:gpu_memory_budget_bytes{model_name=\"stories260K\"} "), 0.5 * static_cast<double>(total));
  EXPECT_EQ(scraped.find("tokenmill:gpu_utilization_ratio"), std::string::npos);  // NVML's, absent here
  srv->shutdown(5);
}

TEST(ServerHttp, RoutingErrorsAndBodyLimits) {
  ServerOptions o;
  o.http.payload_max_bytes = 1000;
  auto srv = make_server(o);
  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0).ok());
  httplib::Client cli("127.0.0.1", srv->port());

  auto nf = cli.Get("/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ(body_json(nf)["error"]["message"], "Not found: GET /nope");

  auto wrong = cli.Get("/v1/completions");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST");
  EXPECT_EQ(body_json(wrong)["error"]["code"], "method_not_allowed");
  auto wrong_post = cli.Post("/health", "{}", "application/json");
  ASSERT_TRUE(wrong_post);
  EXPECT_EQ(wrong_post->status, 405);

  auto big = cli.Post("/v1/completions", std::string(5000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(body_json(big)["error"]["code"], "request_too_large");

  auto bad = cli.Post("/v1/completions", "{\"prompt\":", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_json(bad)["error"]["type"], "invalid_request_error");

  // A working request on the same server after all that.
  auto ok = cli.Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":5,"temperature":0})",
                     "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  const json j = body_json(ok);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  srv->shutdown(5);
}

// --max-logprobs (vLLM's): a request asking for more alternatives per token is a 400 naming the limit.
TEST(ServerHttp, MaxLogprobsBoundsARequest) {
  ServerOptions o;
  o.max_logprobs = 2;
  auto srv = make_server(o);
  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0).ok());
  httplib::Client cli("127.0.0.1", srv->port());
  auto over = cli.Post("/v1/completions", R"({"prompt":"Once","max_tokens":2,"temperature":0,"logprobs":3})",
                       "application/json");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 400) << over->body;
  EXPECT_EQ(body_json(over)["error"]["param"], "logprobs") << over->body;
  auto ok = cli.Post("/v1/completions", R"({"prompt":"Once","max_tokens":2,"temperature":0,"logprobs":2})",
                     "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(body_json(ok)["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u) << ok->body;
  srv->shutdown(5);
}

// Sampling defaults from the command line (llama-server's --temp, ...): a request that omits a field
// gets them; its own fields win.
TEST(ServerHttp, CommandLineSamplingDefaultsApplyToRequestsThatOmitThem) {
  ServerOptions o;
  o.sampling_overrides.temperature = 0.0f;
  o.sampling_overrides.max_tokens = 3;
  auto srv = make_server(o);
  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0).ok());
  httplib::Client cli("127.0.0.1", srv->port());
  std::vector<std::string> texts;
  for (const char* body : {R"({"prompt":"Once upon a time"})", R"({"prompt":"Once upon a time"})",
                           R"({"prompt":"Once upon a time","temperature":0,"max_tokens":3})"}) {
    auto r = cli.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(body_json(r)["usage"]["completion_tokens"], 3) << body;
    texts.push_back(body_json(r)["choices"][0]["text"]);
  }
  EXPECT_EQ(texts[0], texts[2]);  // greedy, as asked explicitly
  EXPECT_EQ(texts[1], texts[2]);
  auto own = cli.Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":5})", "application/json");
  ASSERT_TRUE(own);
  EXPECT_EQ(body_json(own)["usage"]["completion_tokens"], 5);
  srv->shutdown(5);
}

TEST(ServerHttp, ApiKeys) {
  ServerOptions o;
  o.api_keys = {"sekrit"};
  auto srv = make_server(o);
  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0).ok());
  httplib::Client cli("127.0.0.1", srv->port());
  auto no = cli.Get("/v1/models");
  ASSERT_TRUE(no);
  EXPECT_EQ(no->status, 401);
  EXPECT_EQ(body_json(no)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(no->get_header_value("WWW-Authenticate"), "Bearer");
  auto wrong = cli.Get("/v1/models", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto yes = cli.Get("/v1/models", {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(yes);
  EXPECT_EQ(yes->status, 200);
  auto post = cli.Post("/v1/completions", R"({"prompt":"x","max_tokens":2})", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  EXPECT_EQ(cli.Get("/health")->status, 200);   // open
  EXPECT_EQ(cli.Get("/metrics")->status, 200);  // open
  srv->shutdown(5);
}

TEST(ServerHttp, ShutdownLetsAStreamFinish) {
  auto srv = make_server();
  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0).ok());
  const int port = srv->port();
  std::string streamed;
  std::thread client([&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(30, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt":"Once","max_tokens":480,"ignore_eos":true,"stream":true,"temperature":0})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      streamed.append(d, n);
      return true;
    };
    cli.send(req);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (srv->inflight() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(srv->inflight(), 1);
  srv->shutdown(30);  // waits for the stream
  client.join();
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed.substr(0, 500);
  // No longer accepting.
  httplib::Client late("127.0.0.1", port);
  late.set_connection_timeout(1, 0);
  EXPECT_FALSE(late.Get("/health"));
}
