// Named API keys over real loopback HTTP: roles on the admin routes (403), a key's concurrency and
// tokens-per-minute limits (429 with Retry-After and OpenAI's x-ratelimit-* headers), per-key
// metrics labelled with names (never keys), a stream holding its key's slot until it is over, and a
// reload of the key file (a broken file keeps the old keys).
#include <gtest/gtest.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "engine/engine.h"
#include "server/server.h"
#include "test_support.h"
#include "server_test_engine.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::unique_ptr<Engine> stories_engine() { return test::stories_engine(1, 16); }

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

httplib::Headers bearer(const std::string& k) { return {{"Authorization", "Bearer " + k}}; }

const char* kCompletion = R"({"prompt":"Once upon a time","max_tokens":20,"ignore_eos":true,"temperature":0})";

const std::string kKeys =
    "keys:\n"
    "  - {name: boss, key: sk-boss-000001, role: admin}\n"
    "  - {name: plain, key: sk-plain-00002}\n"
    "  - {name: one, key: sk-one-000003, max_concurrent_requests: 1}\n"
    "  - {name: tpm, key: sk-tpm-000004, tokens_per_minute: 30}\n";

}  // namespace

TEST(ApiKeysHttp, RolesLimitsHeadersMetricsAndReload) {
  const std::string file = test::temp_dir() + "/keys.yaml";
  write(file, kKeys);
  ServerOptions o;
  o.http.port = 0;
  o.model_path = test::source_path("models/stories260K/stories260K.gguf");
  o.api_key_file = file;
  auto made = Server::create(o);
  ASSERT_TRUE(made.ok()) << made.error();
  auto& srv = *made;
  ASSERT_TRUE(srv->attach_engine(stories_engine(), 0).ok());
  httplib::Client cli("127.0.0.1", srv->port());
  cli.set_read_timeout(30, 0);

  // Unknown keys: 401. A key without limits: no x-ratelimit-* headers.
  EXPECT_EQ(cli.Post("/v1/completions", kCompletion, "application/json")->status, 401);
  EXPECT_EQ(cli.Post("/v1/completions", bearer("sk-nope-000000"), kCompletion, "application/json")->status, 401);
  auto plain = cli.Post("/v1/completions", bearer("sk-plain-00002"), kCompletion, "application/json");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200) << plain->body;
  EXPECT_FALSE(plain->has_header("x-ratelimit-limit-tokens"));
  EXPECT_FALSE(plain->has_header("x-ratelimit-limit-requests"));

  // Admin routes: a user key gets 403, an admin key gets through to the route (404: no such adapter).
  const char* unload = R"({"lora_name":"none"})";
  auto denied = cli.Post("/v1/unload_lora_adapter", bearer("sk-plain-00002"), unload, "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(json::parse(denied->body)["error"]["code"], "insufficient_permissions");
  auto admin = cli.Post("/v1/unload_lora_adapter", bearer("sk-boss-000001"), unload, "application/json");
  ASSERT_TRUE(admin);
  EXPECT_NE(admin->status, 403);
  EXPECT_NE(admin->status, 401);
  EXPECT_EQ(cli.Post("/models/unload", bearer("sk-plain-00002"), R"({"model":"x"})", "application/json")->status, 403);

  // Tokens per minute (30): the first request's tokens count when it ends; the second is admitted
  // (25 < 30) and takes the window past the limit; the third gets 429.
  auto t1 = cli.Post("/v1/completions", bearer("sk-tpm-000004"), kCompletion, "application/json");
  ASSERT_TRUE(t1);
  ASSERT_EQ(t1->status, 200) << t1->body;
  const int64_t used1 = json::parse(t1->body)["usage"]["total_tokens"].get<int64_t>();
  ASSERT_LT(used1, 30);
  EXPECT_EQ(t1->get_header_value("x-ratelimit-limit-tokens"), "30");
  EXPECT_EQ(t1->get_header_value("x-ratelimit-remaining-tokens"), std::to_string(30 - used1));
  EXPECT_FALSE(t1->get_header_value("x-ratelimit-reset-tokens").empty());
  EXPECT_FALSE(t1->has_header("x-ratelimit-limit-requests"));  // no concurrency limit on this key
  auto t2 = cli.Post("/v1/completions", bearer("sk-tpm-000004"), kCompletion, "application/json");
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->status, 200);
  EXPECT_EQ(t2->get_header_value("x-ratelimit-remaining-tokens"), "0");
  auto t3 = cli.Post("/v1/completions", bearer("sk-tpm-000004"), kCompletion, "application/json");
  ASSERT_TRUE(t3);
  ASSERT_EQ(t3->status, 429) << t3->body;
  const json e3 = json::parse(t3->body);
  EXPECT_EQ(e3["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(e3["error"]["type"], "rate_limit_error");
  const int retry = std::stoi(t3->get_header_value("Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 60);
  EXPECT_EQ(t3->get_header_value("x-ratelimit-limit-tokens"), "30");
  EXPECT_EQ(t3->get_header_value("x-ratelimit-remaining-tokens"), "0");

  // Concurrency (1): a stream the client does not read holds the slot (16 x 480 tokens: more than
  // the socket buffers take), a second request gets 429; once the client hangs up, the slot frees.
  std::atomic<bool> started{false}, release{false};
  std::thread streamer([&] {
    httplib::Client c("127.0.0.1", srv->port());
    c.set_read_timeout(30, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt":"Once","max_tokens":480,"n":16,"ignore_eos":true,"stream":true})";
    req.set_header("Content-Type", "application/json");
    req.set_header("Authorization", "Bearer sk-one-000003");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      started = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return false;  // hang up
    };
    c.send(req);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!started && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(started.load());
  auto busy = cli.Post("/v1/completions", bearer("sk-one-000003"), kCompletion, "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 429) << busy->body;
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_EQ(busy->get_header_value("x-ratelimit-limit-requests"), "1");
  EXPECT_EQ(busy->get_header_value("x-ratelimit-remaining-requests"), "0");
  release = true;
  streamer.join();
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {  // the server notices the hang-up at its next write
    auto r = cli.Post("/v1/completions", bearer("sk-one-000003"), kCompletion, "application/json");
    status = r ? r->status : 0;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);

  // Per-key metrics: names as labels, never the keys.
  const std::string metrics = cli.Get("/metrics")->body;
  for (const std::string& line :
       {std::string("tokenmill:api_key_requests_total{key=\"tpm\",status=\"429\"} 1\n"),
        std::string("tokenmill:api_key_requests_total{key=\"tpm\",status=\"200\"} 2\n"),
        std::string("tokenmill:api_key_rate_limited_total{key=\"tpm\",limit=\"tokens\"} 1\n"),
        std::string("tokenmill:api_key_rate_limited_total{key=\"one\",limit=\"requests\"} "),  // 1 or more: the retries
        std::string("tokenmill:api_key_requests_total{key=\"plain\",status=\"403\"}"),
        std::string("tokenmill:api_key_tokens_total{key=\"tpm\"} ") + std::to_string(2 * used1) + "\n"})
    EXPECT_NE(metrics.find(line), std::string::npos) << line;
  EXPECT_EQ(metrics.find("sk-"), std::string::npos);

  // Reload: "plain" goes, "tpm" gets a higher limit (its window is kept: 2 x used1 of 1000).
  write(file, "keys:\n  - {name: tpm, key: sk-tpm-000004, tokens_per_minute: 1000}\n");
  auto n = srv->reload_api_keys();
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(cli.Post("/v1/completions", bearer("sk-plain-00002"), kCompletion, "application/json")->status, 401);
  // A stream counts its tokens when it is over.
  auto s = cli.Post("/v1/completions", bearer("sk-tpm-000004"),
                    R"({"prompt":"Once upon a time","max_tokens":20,"ignore_eos":true,"stream":true})",
                    "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  EXPECT_EQ(s->get_header_value("x-ratelimit-remaining-tokens"), std::to_string(1000 - 2 * used1));
  auto after = cli.Post("/v1/completions", bearer("sk-tpm-000004"), kCompletion, "application/json");
  ASSERT_TRUE(after);
  ASSERT_EQ(after->status, 200);
  EXPECT_EQ(after->get_header_value("x-ratelimit-remaining-tokens"), std::to_string(1000 - 4 * used1));

  // A broken file keeps the keys loaded before.
  write(file, "keys:\n  - {name: tpm, key: sk-tpm-000004, tokens_per_minute: lots}\n");
  EXPECT_FALSE(srv->reload_api_keys().ok());
  EXPECT_EQ(cli.Post("/v1/completions", bearer("sk-tpm-000004"), kCompletion, "application/json")->status, 200);
  srv->shutdown(5);
}
