// Decoding of OpenAI streaming responses (StreamAccumulator) and request bodies, without network.
#include <gtest/gtest.h>

#include "loadgen/client.h"

namespace tmill::loadgen {
namespace {

std::string chat_chunk(const std::string& content, const char* finish = nullptr) {
  nlohmann::json j = {{"object", "chat.completion.chunk"},
                      {"choices", {{{"index", 0}, {"delta", {{"content", content}}},
                                    {"finish_reason", finish ? nlohmann::json(finish) : nlohmann::json(nullptr)}}}}};
  return "data: " + j.dump() + "\n\n";
}
const std::string kUsage =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":9,\"total_tokens\":21}}\n\n";

TEST(StreamDecode, ChatTimingsAndUsage) {
  StreamAccumulator acc(Endpoint::Chat);
  acc.on_bytes("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n", 0.01);
  acc.on_bytes(chat_chunk("Hel"), 0.20);  // first content: TTFT
  acc.on_bytes(chat_chunk("lo") + chat_chunk(" wor"), 0.25);
  acc.on_bytes(chat_chunk("ld", "stop") + kUsage + "data: [DONE]\n\n", 0.30);
  acc.on_end();
  RequestResult r;
  r.e2el_s = 0.31;
  acc.fill(r);
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.failure, FailureKind::None);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.20);
  EXPECT_EQ(r.chunk_s, (std::vector<double>{0.20, 0.25, 0.25, 0.30}));
  EXPECT_TRUE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 9);  // from usage, not the 4 chunks
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_EQ(r.output_chars, 11u);  // "Hel" "lo" " wor" "ld"
  EXPECT_EQ(r.finish_reason, "stop");
}

TEST(StreamDecode, CompletionsTextAndChunkCountFallback) {
  StreamAccumulator acc(Endpoint::Completions);
  acc.on_bytes("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"\"}]}\n\n", 0.1);
  acc.on_bytes("data: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", 0.2);
  acc.on_end();
  RequestResult r;
  r.e2el_s = 0.2;
  acc.fill(r);
  EXPECT_TRUE(r.success);
  EXPECT_FALSE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 2);  // counted chunks
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
}

TEST(StreamDecode, ReasoningContentCountsAsOutput) {
  StreamAccumulator acc(Endpoint::Chat);
  acc.on_bytes("data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"think\"}}]}\n\ndata: [DONE]\n\n", 0.5);
  acc.on_end();
  RequestResult r;
  acc.fill(r);
  EXPECT_TRUE(r.success);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
}

TEST(StreamDecode, ErrorEventIsExplicitFailure) {
  StreamAccumulator acc(Endpoint::Chat);
  acc.on_bytes(chat_chunk("x") + "data: {\"error\":{\"message\":\"out of KV cache\",\"code\":503}}\n\n", 0.1);
  acc.on_end();
  RequestResult r;
  acc.fill(r);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.failure, FailureKind::StreamError);
  EXPECT_EQ(r.error, "out of KV cache");
  EXPECT_TRUE(is_explicit_failure(r.failure));
}

TEST(StreamDecode, UndecodableEventIsMalformed) {
  StreamAccumulator acc(Endpoint::Chat);
  acc.on_bytes(chat_chunk("x") + "data: {not json\n\n" + chat_chunk("y") + "data: [DONE]\n\n", 0.1);
  acc.on_end();
  RequestResult r;
  acc.fill(r);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.failure, FailureKind::Malformed);
  EXPECT_FALSE(is_explicit_failure(r.failure));
}

TEST(StreamDecode, EndWithoutDoneOrFinishIsDisconnect) {
  StreamAccumulator acc(Endpoint::Chat);
  acc.on_bytes(chat_chunk("x"), 0.1);
  acc.on_end();
  RequestResult r;
  acc.fill(r);
  EXPECT_EQ(r.failure, FailureKind::Disconnect);
  // A finish_reason without [DONE] is a complete answer (some servers omit [DONE]).
  StreamAccumulator acc2(Endpoint::Chat);
  acc2.on_bytes(chat_chunk("x", "stop"), 0.1);
  acc2.on_end();
  RequestResult r2;
  acc2.fill(r2);
  EXPECT_TRUE(r2.success);
}

TEST(StreamDecode, FailureLabels) {
  EXPECT_EQ(failure_label(FailureKind::Http, 429), "http_429");
  EXPECT_EQ(failure_label(FailureKind::Timeout, 0), "timeout");
  EXPECT_EQ(failure_label(FailureKind::Disconnect, 200), "disconnect");
  EXPECT_EQ(failure_label(FailureKind::Malformed, 200), "malformed_stream");
}

TEST(RequestBody, ChatAndCompletions) {
  Prompt p;
  p.text = "say hi";
  auto c = build_request_body(Endpoint::Chat, "m", p, 32, true);
  EXPECT_EQ(c["model"], "m");
  EXPECT_EQ(c["messages"][0]["role"], "user");
  EXPECT_EQ(c["messages"][0]["content"], "say hi");
  EXPECT_EQ(c["max_tokens"], 32);
  EXPECT_EQ(c["stream"], true);
  EXPECT_EQ(c["stream_options"]["include_usage"], true);
  EXPECT_EQ(c["ignore_eos"], true);
  auto k = build_request_body(Endpoint::Completions, "m", p, 8, false);
  EXPECT_EQ(k["prompt"], "say hi");
  EXPECT_FALSE(k.contains("ignore_eos"));
  EXPECT_FALSE(k.contains("messages"));
  p.messages = nlohmann::json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "q"}}});
  EXPECT_EQ(build_request_body(Endpoint::Chat, "m", p, 8, false)["messages"], p.messages);
  EXPECT_EQ(build_request_body(Endpoint::Completions, "m", p, 8, false)["prompt"], "be brief\nq\n");
}

TEST(BaseUrl, Parsing) {
  auto a = parse_base_url("http://127.0.0.1:8000/");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->origin, "http://127.0.0.1:8000");
  EXPECT_EQ(a->prefix, "");
  auto b = parse_base_url("https://host/proxy/v1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->origin, "https://host");
  EXPECT_EQ(b->prefix, "/proxy");
  EXPECT_FALSE(parse_base_url("localhost:8000").ok());
  EXPECT_FALSE(parse_base_url("ftp://x").ok());
  EXPECT_FALSE(parse_base_url("http://").ok());
}

}  // namespace
}  // namespace tmill::loadgen
