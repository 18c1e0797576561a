// Speculative decoding through the server: vLLM's spec_decode metrics (with the position label),
// and the per-request opt-out "speculative": false.
#include <gtest/gtest.h>

#include <httplib.h>


#include "engine/engine.h"
#include "server/server.h"
#include "test_support.h"
#include "server_test_engine.h"

using namespace tmill;
using namespace tmill::server;

namespace {

double metric(const std::string& text, const std::string& series) {
  const auto pos = text.find(series + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(text.substr(pos + series.size() + 1));
}

}  // namespace

TEST(ServerSpeculative, MetricsAndOptOut) {
  EngineConfig c = test::stories_config();
  auto spec = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1,
                                           "prompt_lookup_max": 3, "adaptive": false})");
  ASSERT_TRUE(spec.ok()) << spec.error();
  c.speculative = *spec;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  ServerOptions o;
  o.http.port = 0;
  o.model_path = c.model_path;
  o.version = "test";
  auto srv = Server::create(o);
  ASSERT_TRUE(srv.ok()) << srv.error();
  ASSERT_TRUE((*srv)->attach_engine(std::move(e).value(), 0).ok());
  httplib::Client cli("127.0.0.1", (*srv)->port());
  const std::string m = "{model_name=\"stories260K\"}";
  auto scrape = [&] { return cli.Get("/metrics")->body; };
  std::string text = scrape();
  EXPECT_EQ(metric(text, "vllm:spec_decode_num_drafts_total" + m), 0);
  for (int p = 0; p < 3; ++p)
    EXPECT_EQ(metric(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"stories260K\",position=\"" +
                               std::to_string(p) + "\"}"),
              0)
        << text;
  const std::string body =
      R"({"prompt": "Once upon a time there was a cat. Once upon a time there was a", "max_tokens": 40, "temperature": 0)";
  auto off = cli.Post("/v1/completions", body + R"(, "speculative": false})", "application/json");
  ASSERT_TRUE(off);
  ASSERT_EQ(off->status, 200) << off->body;
  EXPECT_EQ(metric(scrape(), "vllm:spec_decode_num_drafts_total" + m), 0);  // opted out: no drafts
  auto on = cli.Post("/v1/completions", body + "}", "application/json");
  ASSERT_TRUE(on);
  ASSERT_EQ(on->status, 200) << on->body;
  EXPECT_EQ(json::parse(on->body)["choices"][0]["text"], json::parse(off->body)["choices"][0]["text"]);
  text = scrape();
  const double drafts = metric(text, "vllm:spec_decode_num_drafts_total" + m);
  const double draft_tokens = metric(text, "vllm:spec_decode_num_draft_tokens_total" + m);
  const double accepted = metric(text, "vllm:spec_decode_num_accepted_tokens_total" + m);
  EXPECT_GT(drafts, 0);
  EXPECT_GE(draft_tokens, drafts);
  EXPECT_LE(accepted, draft_tokens);
  double per_pos = 0;
  for (int p = 0; p < 3; ++p)
    per_pos += metric(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"stories260K\",position=\"" +
                                std::to_string(p) + "\"}");
  EXPECT_EQ(per_pos, accepted);
  EXPECT_NE(text.find("# TYPE vllm:spec_decode_num_drafts_total counter"), std::string::npos);
  (*srv)->shutdown(5);
}
