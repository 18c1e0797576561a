// Prometheus text exposition of the metrics registry, and API-key checks.
#include <gtest/gtest.h>

#include "server/auth.h"
#include "server/metrics_registry.h"
#include "server/server_metrics.h"

using namespace tmill;
using namespace tmill::server;

TEST(MetricsRegistry, ExpositionFormat) {
  MetricsRegistry r;
  r.counter("vllm:prompt_tokens_total", "Prompt tokens.", {{"model_name", "m"}}).inc(5);
  r.counter("vllm:prompt_tokens_total", "Prompt tokens.", {{"model_name", "m"}}).inc(2.5);
  r.gauge("tokenmill:g", "A gauge with \\ and\nnewline.", {{"model_name", "a\"b\\c\nd"}}).set(-3);
  Histogram& h = r.histogram("x_seconds", "Latency.", {0.1, 1, 2.5}, {{"model_name", "m"}});
  h.observe(0.05);
  h.observe(0.1);  // "le" is inclusive
  h.observe(2);
  h.observe(100);
  r.counter("plain_total", "No labels.").inc();
  EXPECT_EQ(r.render(),
            "# HELP vllm:prompt_tokens_total Prompt tokens.\n"
            "# TYPE vllm:prompt_tokens_total counter\n"
            "vllm:prompt_tokens_total{model_name=\"m\"} 7.5\n"
            "# HELP tokenmill:g A gauge with \\\\ and\\nnewline.\n"
            "# TYPE tokenmill:g gauge\n"
            "tokenmill:g{model_name=\"a\\\"b\\\\c\\nd\"} -3\n"
            "# HELP x_seconds Latency.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n"
            "x_seconds_bucket{model_name=\"m\",le=\"1\"} 2\n"
            "x_seconds_bucket{model_name=\"m\",le=\"2.5\"} 3\n"
            "x_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
            "x_seconds_sum{model_name=\"m\"} 102.15\n"
            "x_seconds_count{model_name=\"m\"} 4\n"
            "# HELP plain_total No labels.\n"
            "# TYPE plain_total counter\n"
            "plain_total 1\n");
}

TEST(MetricsRegistry, SeriesPerLabelSetAndCollectors) {
  MetricsRegistry r;
  Counter& a = r.counter("c_total", "h", {{"reason", "a"}});
  Counter& b = r.counter("c_total", "h", {{"reason", "b"}});
  EXPECT_NE(&a, &b);
  EXPECT_EQ(&a, &r.counter("c_total", "h", {{"reason", "a"}}));
  int calls = 0;
  r.add_collector([&] { r.gauge("g", "h").set(++calls); });
  const std::string text = r.render();
  EXPECT_EQ(calls, 1);
  EXPECT_NE(text.find("c_total{reason=\"a\"} 0\nc_total{reason=\"b\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g 1\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, Helpers) {
  EXPECT_EQ(format_metric_value(3), "3");
  EXPECT_EQ(format_metric_value(0.005), "0.005");
  EXPECT_EQ(format_metric_value(1e20), "1e+20");
  EXPECT_EQ(format_metric_value(1.0 / 0.0), "+Inf");
  EXPECT_EQ(format_metric_value(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(format_metric_value(0.0 / 0.0), "NaN");
  EXPECT_EQ(buckets_1_2_5(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(buckets_1_2_5(512), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(buckets_1_2_5(1), (std::vector<double>{1}));
  EXPECT_TRUE(valid_metric_name("vllm:num_requests_running"));
  EXPECT_FALSE(valid_metric_name("9abc"));
  EXPECT_FALSE(valid_metric_name("a-b"));
  EXPECT_TRUE(valid_label_name("model_name"));
  EXPECT_FALSE(valid_label_name("__name"));
  EXPECT_FALSE(valid_label_name("a:b"));
}

TEST(ServerMetrics, AdmissionCountFollowsTheEngineHooks) {
  ServerMetrics m("m");
  EXPECT_TRUE(m.try_admit(2, 3));
  EXPECT_FALSE(m.try_admit(2, 3));  // 4 > 3
  EXPECT_TRUE(m.try_admit(1, 3));
  EXPECT_EQ(m.queued(), 3);
  RequestTimings t;
  m.on_request_scheduled(t);  // leaves the queue when scheduled ...
  t.scheduled = true;
  t.finish_reason = FinishReason::Stop;
  m.on_request_done(t);       // ... and is not counted again when done
  RequestTimings never;
  never.finish_reason = FinishReason::Error;
  m.on_request_done(never);   // timed out in the queue
  EXPECT_EQ(m.queued(), 1);
  m.cancel_admission(1);
  EXPECT_EQ(m.queued(), 0);
  EXPECT_TRUE(m.try_admit(100, 0));  // 0: unlimited
  const std::string text = m.render();
  EXPECT_NE(text.find("vllm:request_success_total{model_name=\"m\",finished_reason=\"stop\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tokenmill:admission_queue_requests{model_name=\"m\"} 100\n"), std::string::npos);
  EXPECT_NE(text.find("tokenmill:process_resident_memory_bytes{model_name=\"m\"} "), std::string::npos);
}

TEST(ServerMetrics, FailureReasonsFeedTheirCounters) {
  ServerMetrics m("m");
  m.on_failure("queue_full");
  m.on_failure("queue_timeout");
  m.on_failure("context_length_exceeded");
  m.on_client_abort();
  m.on_first_token(0.02, 11);
  const std::string text = m.render();
  for (const char* line :
       {"tokenmill:requests_rejected_total{model_name=\"m\"} 1\n", "tokenmill:request_timeouts_total{model_name=\"m\"} 1\n",
        "tokenmill:request_failures_total{model_name=\"m\",reason=\"queue_full\"} 1\n",
        "tokenmill:out_of_kv_events_total{model_name=\"m\",kind=\"prompt_too_long\"} 1\n",
        "tokenmill:requests_aborted_by_client_total{model_name=\"m\"} 1\n", "vllm:prompt_tokens_total{model_name=\"m\"} 11\n",
        "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.02\"} 1\n",
        "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.01\"} 0\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

TEST(Auth, ConstantTimeCompareAndBearer) {
  EXPECT_TRUE(constant_time_equals("secret", "secret"));
  EXPECT_FALSE(constant_time_equals("secret", "secreT"));
  EXPECT_FALSE(constant_time_equals("secret", "secret2"));
  EXPECT_FALSE(constant_time_equals("", "x"));
  EXPECT_TRUE(constant_time_equals("", ""));
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), "");
  EXPECT_EQ(bearer_token("Bearerabc"), "");
  EXPECT_EQ(bearer_token(""), "");
  const std::vector<std::string> keys = {"k1", "k2-long"};
  EXPECT_TRUE(authorized({}, ""));
  EXPECT_TRUE(authorized(keys, "Bearer k1"));
  EXPECT_TRUE(authorized(keys, "Bearer k2-long"));
  EXPECT_FALSE(authorized(keys, "Bearer k3"));
  EXPECT_FALSE(authorized(keys, "Bearer "));
  EXPECT_FALSE(authorized(keys, "k1"));
  EXPECT_FALSE(authorized(keys, ""));
}
