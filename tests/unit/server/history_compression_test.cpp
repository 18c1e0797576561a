// History compression (history_compression.h) with a fake summarizer on the stories260K tokenizer:
// when it happens, what is kept (system prompt, latest turn, whole turns), the summary's place, the
// cache that lets the next turn reuse a summary, and the incremental summary from the cached one.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "chat/messages.h"
#include "server/history_compression.h"
#include "server/request_fields.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

ServerContext context() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    auto t = Tokenizer::load(test::source_path("models/stories260K/stories260K.gguf"));
    EXPECT_TRUE(t.ok()) << t.error();
    return std::shared_ptr<const Tokenizer>(*t);
  }();
  auto t = ChatTemplate::parse(
      "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
      "{% if add_generation_prompt %}assistant:{% endif %}");
  EXPECT_TRUE(t.ok()) << t.error();
  ServerContext c;
  c.served_model_name = "stories";
  c.tokenizer = tok;
  c.chat_template = std::make_shared<const ChatTemplate>(std::move(t).value());
  c.max_model_len = 512;
  c.n_vocab = tok->n_vocab();
  return c;
}

CompressionOptions options() {
  CompressionOptions o;
  o.default_on = true;
  o.threshold = 0.5;  // 256 of 512 tokens
  o.summary_max_tokens = 24;
  o.prompt = "Summarize.";
  return o;
}

json conversation(int turns) {
  json m = json::array({{{"role", "system"}, {"content", "You are a kind storyteller."}}});
  for (int i = 0; i < turns; ++i) {
    m.push_back({{"role", "user"}, {"content", fmt::format("Tell me about the little cat number {} in the park.", i)}});
    m.push_back({{"role", "assistant"}, {"content", fmt::format("The cat {} played with a red ball all day long.", i)}});
  }
  m.push_back({{"role", "user"}, {"content", "And what happened at the end?"}});
  return m;
}

int64_t prompt_tokens(const json& body, const ServerContext& c) {
  return static_cast<int64_t>(tokenize_chat_prompt(detail::render_messages(body, c), *c.tokenizer, false).size());
}

struct FakeSummarizer {
  std::vector<SummaryJob> jobs;
  Summarizer fn() {
    return [this](const SummaryJob& j) -> Result<SummaryResult> {
      jobs.push_back(j);
      return SummaryResult{fmt::format(" They talked about cats (summary {}). \n", jobs.size()), 100, 9};
    };
  }
};

}  // namespace

TEST(HistoryCompression, ShortConversationsStayAsTheyAre) {
  const ServerContext c = context();
  SummaryCache cache;
  FakeSummarizer fake;
  json body = {{"messages", conversation(3)}};
  const json before = body;
  auto rep = compress_history(body, c, options(), cache, 0, fake.fn());
  ASSERT_TRUE(rep.ok()) << rep.error();
  EXPECT_EQ(rep->compressed_messages, 0);
  EXPECT_EQ(body, before);
  EXPECT_TRUE(fake.jobs.empty());
}

TEST(HistoryCompression, OldestTurnsBecomeASummaryKeepingSystemAndLatest) {
  ServerContext c = context();
  c.max_model_len = 1024;  // the whole transcript fits a summarization request
  CompressionOptions o = options();
  o.threshold = 0.25;      // still 256 tokens
  SummaryCache cache;
  FakeSummarizer fake;
  const json msgs = conversation(12);
  json body = {{"messages", msgs}};
  const int64_t before = prompt_tokens(body, c);
  ASSERT_GT(before, 256);
  auto rep = compress_history(body, c, o, cache, 0, fake.fn());
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(fake.jobs.size(), 1u);
  EXPECT_EQ(fake.jobs[0].instruction, "Summarize.");
  EXPECT_NE(fake.jobs[0].transcript.find("user: Tell me about the little cat number 0 in the park."), std::string::npos)
      << fake.jobs[0].transcript;
  EXPECT_EQ(fake.jobs[0].transcript.find("And what happened at the end?"), std::string::npos);
  EXPECT_GT(rep->compressed_messages, 0);
  EXPECT_EQ(rep->compressed_messages % 2, 0);  // whole turns: user + assistant
  EXPECT_FALSE(rep->cached);
  EXPECT_EQ(rep->summary_prompt_tokens, 100);
  EXPECT_EQ(rep->summary_completion_tokens, 9);
  const json& out = body["messages"];
  EXPECT_EQ(out[0]["role"], "system");
  EXPECT_EQ(out[0]["content"], "You are a kind storyteller.\n\nSummary of the earlier conversation:\n"
                               "They talked about cats (summary 1).");
  EXPECT_EQ(out.back(), msgs.back());
  EXPECT_EQ(out[1], msgs[1 + static_cast<size_t>(rep->compressed_messages)]);  // a whole turn starts there
  EXPECT_EQ(out.size(), msgs.size() - static_cast<size_t>(rep->compressed_messages));
  const int64_t after = prompt_tokens(body, c);
  EXPECT_LE(after, 256 / 2 + 24);  // about half the threshold
  EXPECT_EQ(rep->saved_prompt_tokens, before - after);
  EXPECT_GT(rep->summary_tokens, 0);
}

TEST(HistoryCompression, TheNextTurnReusesTheCachedSummaryThenExtendsIt) {
  const ServerContext c = context();
  SummaryCache cache;
  FakeSummarizer fake;
  json first = {{"messages", conversation(20)}};
  auto r1 = compress_history(first, c, options(), cache, 0, fake.fn());
  ASSERT_TRUE(r1.ok() && r1->compressed_messages > 0);
  // The client sends the whole history again plus one more exchange.
  json next_msgs = conversation(20);
  next_msgs.push_back({{"role", "assistant"}, {"content", "They all went home."}});
  next_msgs.push_back({{"role", "user"}, {"content", "Tell me more."}});
  json second = {{"messages", next_msgs}};
  auto r2 = compress_history(second, c, options(), cache, 0, fake.fn());
  ASSERT_TRUE(r2.ok()) << r2.error();
  EXPECT_EQ(fake.jobs.size(), 1u);  // no new summary
  EXPECT_TRUE(r2->cached);
  EXPECT_EQ(r2->compressed_messages, r1->compressed_messages);
  EXPECT_EQ(r2->summary_prompt_tokens, 0);
  EXPECT_EQ(second["messages"][0], first["messages"][0]);
  // Another model (salt) does not see it.
  json other = {{"messages", next_msgs}};
  ASSERT_TRUE(compress_history(other, c, options(), cache, 99, fake.fn()).ok());
  EXPECT_EQ(fake.jobs.size(), 2u);
  // Much later, the cached summary no longer makes it fit: a new one starts from it.
  json long_msgs = conversation(40);
  json third = {{"messages", long_msgs}};
  auto r3 = compress_history(third, c, options(), cache, 0, fake.fn());
  ASSERT_TRUE(r3.ok()) << r3.error();
  ASSERT_EQ(fake.jobs.size(), 3u);
  EXPECT_EQ(fake.jobs[2].transcript.rfind("Summary so far: They talked about cats (summary 1).", 0), 0u);
  EXPECT_EQ(fake.jobs[2].transcript.find("cat number 0 "), std::string::npos);  // already in the summary
  EXPECT_FALSE(r3->cached);
  EXPECT_GT(r3->compressed_messages, r1->compressed_messages);
  EXPECT_LE(prompt_tokens(third, c), 256);
}

TEST(HistoryCompression, PerRequestSwitchAndErrors) {
  const ServerContext c = context();
  SummaryCache cache;
  FakeSummarizer fake;
  json off = {{"messages", conversation(20)}, {"context_management", {{"compress", false}}}};
  const json before = off;
  auto r = compress_history(off, c, options(), cache, 0, fake.fn());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(off, before);
  CompressionOptions server_off = options();
  server_off.default_on = false;
  json on = {{"messages", conversation(20)}, {"context_management", {{"compress", true}}}};
  r = compress_history(on, c, server_off, cache, 0, fake.fn());
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->compressed_messages, 0);
  json bad = {{"messages", conversation(2)}, {"context_management", {{"compress", "yes"}}}};
  try {
    (void)compress_history(bad, c, options(), cache, 0, fake.fn());
    FAIL() << "expected a 400";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.error.param, "context_management");
  }
  // A failing summarizer is an error, and the body is left alone.
  json body = {{"messages", conversation(20)}};
  SummaryCache empty;
  auto failed = compress_history(body, c, options(), empty, 0,
                                 [](const SummaryJob&) -> Result<SummaryResult> { return Error{"boom"}; });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(body["messages"], conversation(20));
}

TEST(HistoryCompression, SummaryCacheDropsTheLeastRecentlyUsed) {
  SummaryCache cache(2);
  cache.put(1, "a");
  cache.put(2, "b");
  EXPECT_EQ(cache.get(1).value_or(""), "a");  // 1 is now the most recent
  cache.put(3, "c");
  EXPECT_FALSE(cache.get(2).has_value());
  EXPECT_EQ(cache.get(1).value_or(""), "a");
  EXPECT_EQ(cache.get(3).value_or(""), "c");
  EXPECT_EQ(cache.size(), 2u);
}
