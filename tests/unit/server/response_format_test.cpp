// Response JSON, streaming chunks, logprobs formats, SSE framing and error bodies.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_response.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {
std::shared_ptr<const Tokenizer> stories_tok() {
  static std::shared_ptr<const Tokenizer> t =
      std::shared_ptr<const Tokenizer>(*Tokenizer::load(test::source_path("models/stories260K/stories260K.gguf")));
  return t;
}
ResponseMeta meta(ApiKind kind) {
  ResponseMeta m;
  m.id = kind == ApiKind::Chat ? "chatcmpl-1" : "cmpl-1";
  m.created = 1700000000;
  m.model = "stories";
  m.kind = kind;
  return m;
}
}  // namespace

TEST(Sse, Framing) {
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // Invalid UTF-8 never reaches the wire: replaced by U+FFFD.
  EXPECT_EQ(sse_event(json{{"t", std::string("a\xff")}}), "data: {\"t\":\"a\xEF\xBF\xBD\"}\n\n");
  // Newlines inside strings are escaped, so one event is one line.
  EXPECT_EQ(sse_event(json{{"t", "x\ny"}}), "data: {\"t\":\"x\\ny\"}\n\n");
}

TEST(ResponseFormat, ChatChunksAndUsageChunk) {
  const json first = chat_chunk(meta(ApiKind::Chat), 0, {{"role", "assistant"}, {"content", ""}}, nullptr,
                                FinishReason::None, nullptr);
  EXPECT_EQ(dump_json(first),
            R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"stories",)"
            R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})");
  const json null_usage = nullptr;
  const json last = chat_chunk(meta(ApiKind::Chat), 1, json::object(), nullptr, FinishReason::Stop, "END", &null_usage);
  EXPECT_EQ(dump_json(last["choices"][0]),
            R"({"index":1,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":"END"})");
  EXPECT_TRUE(last.contains("usage") && last["usage"].is_null());
  const json u = usage_chunk(meta(ApiKind::Chat), Usage{10, 5, 8});
  EXPECT_EQ(dump_json(u),
            R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"stories",)"
            R"("choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,)"
            R"("prompt_tokens_details":{"cached_tokens":8}}})");
  // truncation "auto" reports what it dropped in usage (absent when nothing was).
  EXPECT_EQ(dump_json(usage_json(Usage{10, 5, 0, 4, 120})),
            R"({"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},)"
            R"("truncation":{"dropped_messages":4,"dropped_prompt_tokens":120}})");
  const json c = completion_chunk(meta(ApiKind::Completion), 2, "hi", nullptr, FinishReason::Length, nullptr);
  EXPECT_EQ(dump_json(c["choices"][0]),
            R"({"index":2,"text":"hi","logprobs":null,"finish_reason":"length","stop_reason":null})");
  EXPECT_EQ(c["object"], "text_completion");
}

TEST(ResponseFormat, NonStreamingBodies) {
  ChoiceOutput a;
  a.index = 0;
  a.text = "Once";
  a.finish = FinishReason::Length;
  ChoiceOutput b;
  b.index = 1;
  b.text = "Then";
  b.finish = FinishReason::Stop;
  b.stop_reason = 2;
  ResponseMeta m = meta(ApiKind::Chat);
  m.prompt_truncated = true;
  const json r = chat_response(m, {a, b}, Usage{3, 4, 0}, *stories_tok(), {});
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(dump_json(r["choices"][0]),
            R"({"index":0,"message":{"role":"assistant","content":"Once"},"logprobs":null,)"
            R"("finish_reason":"length","stop_reason":null})");
  EXPECT_EQ(r["choices"][1]["stop_reason"], 2);
  EXPECT_EQ(r["usage"]["total_tokens"], 7);
  EXPECT_EQ(r["prompt_truncated"], true);
  const json c = completion_response(meta(ApiKind::Completion), {a}, Usage{3, 4, 0}, *stories_tok(), {}, {"Hi: "});
  EXPECT_EQ(c["choices"][0]["text"], "Hi: Once");
  EXPECT_FALSE(c.contains("prompt_truncated"));
}

TEST(ResponseFormat, LogprobsBothFormats) {
  const Tokenizer& t = *stories_tok();
  std::vector<int32_t> ids = t.encode("Once upon", false, false);
  ASSERT_GE(ids.size(), 2u);
  std::vector<SampleResult> lps;
  for (int32_t id : ids) {
    SampleResult s;
    s.token = id;
    s.logprob = -0.5f;
    s.top = {{id, -0.5f}, {7, -1.25f}};
    lps.push_back(s);
  }
  const json chat = chat_logprobs_json(t, ids, lps, 2);
  ASSERT_EQ(chat["content"].size(), ids.size());
  const json& e0 = chat["content"][0];
  EXPECT_EQ(e0["token"], t.token_to_piece(ids[0]));
  EXPECT_DOUBLE_EQ(e0["logprob"].get<double>(), -0.5);
  EXPECT_EQ(e0["bytes"].size(), t.token_to_piece(ids[0]).size());
  ASSERT_EQ(e0["top_logprobs"].size(), 2u);
  EXPECT_EQ(e0["top_logprobs"][1]["token"], t.token_to_piece(7));
  EXPECT_DOUBLE_EQ(e0["top_logprobs"][1]["logprob"].get<double>(), -1.25);
  // top_n = 1 keeps only the best alternative.
  EXPECT_EQ(chat_logprobs_json(t, ids, lps, 1)["content"][0]["top_logprobs"].size(), 1u);

  int64_t offset = 3;  // e.g. after an echoed 3-character prompt
  const json comp = completion_logprobs_json(t, ids, lps, 2, &offset);
  ASSERT_EQ(comp["tokens"].size(), ids.size());
  EXPECT_EQ(comp["text_offset"][0], 3);
  EXPECT_EQ(comp["text_offset"][1], 3 + static_cast<int64_t>(utf8_length(t.token_to_piece(ids[0]))));
  EXPECT_DOUBLE_EQ(comp["token_logprobs"][1].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(comp["top_logprobs"][0][t.token_to_piece(7)].get<double>(), -1.25);
  std::string joined;
  for (const auto& s : comp["tokens"]) joined += s.get<std::string>();
  EXPECT_EQ(offset, 3 + static_cast<int64_t>(utf8_length(joined)));
}

TEST(ResponseFormat, Utf8LengthCountsCodePoints) {
  EXPECT_EQ(utf8_length(""), 0u);
  EXPECT_EQ(utf8_length("abc"), 3u);
  EXPECT_EQ(utf8_length("h\xC3\xA9llo"), 5u);        // é
  EXPECT_EQ(utf8_length("\xE4\xB8\xAD\xF0\x9F\x98\x80"), 2u);  // 中 😀
}

TEST(ApiErrors, OpenAiShape) {
  ApiError e = bad_request("bad thing", "max_tokens");
  EXPECT_EQ(error_body(e),
            R"({"error":{"message":"bad thing","type":"invalid_request_error","param":"max_tokens","code":null}})");
  ApiError k;
  k.status = 401;
  k.message = "no";
  k.code = "invalid_api_key";
  EXPECT_EQ(error_json(k)["error"]["type"], "authentication_error");
  EXPECT_EQ(error_json(k)["error"]["param"], nullptr);
  EXPECT_EQ(error_type(429), "rate_limit_error");
  EXPECT_EQ(error_type(503), "service_unavailable_error");
  EXPECT_EQ(error_type(413), "invalid_request_error");
  EXPECT_EQ(error_type(500), "internal_server_error");
  EXPECT_EQ(finish_reason_json(FinishReason::None), nullptr);
  EXPECT_EQ(finish_reason_json(FinishReason::Length), "length");
}

TEST(ResponseFormat, IdsAreFreshAndPrefixed) {
  ResponseMeta a = make_meta(ApiKind::Chat, "m"), b = make_meta(ApiKind::Chat, "m");
  EXPECT_EQ(a.id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(a.id.size(), 9u + 32u);
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(make_meta(ApiKind::Completion, "m").id.rfind("cmpl-", 0), 0u);
  EXPECT_GT(a.created, 1600000000);
}
