#include <gtest/gtest.h>

#include "loadgen/sse.h"

namespace tmill::loadgen {
namespace {

std::vector<SseEvent> feed_pieces(const std::vector<std::string>& pieces, bool finish = false) {
  SseParser p;
  std::vector<SseEvent> out;
  auto h = [&](const SseEvent& e) { out.push_back(e); };
  for (const auto& s : pieces) p.feed(s, h);
  if (finish) p.finish(h);
  return out;
}

TEST(Sse, MultipleEventsInOneRead) {
  auto ev = feed_pieces({"data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n"});
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].data, "{\"a\":1}");
  EXPECT_EQ(ev[1].data, "{\"a\":2}");
  EXPECT_EQ(ev[2].data, "[DONE]");
}

TEST(Sse, EventSplitAcrossReadsAtEveryPosition) {
  const std::string stream = "data: {\"x\":\"hello\"}\r\n\r\ndata: second\r\n\r\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    auto ev = feed_pieces({stream.substr(0, cut), stream.substr(cut)});
    ASSERT_EQ(ev.size(), 2u) << "cut at " << cut;
    EXPECT_EQ(ev[0].data, "{\"x\":\"hello\"}") << "cut at " << cut;
    EXPECT_EQ(ev[1].data, "second");
  }
}

TEST(Sse, ByteByByteWithCrLfCrAndLf) {
  const std::string stream = "data: one\r\n\r\ndata: two\r\rdata: three\n\n";
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  auto ev = feed_pieces(bytes);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].data, "one");
  EXPECT_EQ(ev[1].data, "two");
  EXPECT_EQ(ev[2].data, "three");
}

TEST(Sse, CommentsFieldsAndMultiLineData) {
  auto ev = feed_pieces({": keep-alive\n\nevent: error\nid: 7\ndata: line1\ndata:line2\nretry: 100\n\n"});
  // The comment-only block dispatches nothing (no data).
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event, "error");
  EXPECT_EQ(ev[0].id, "7");
  EXPECT_EQ(ev[0].data, "line1\nline2");  // one leading space removed only when present
}

TEST(Sse, OnlyOneLeadingSpaceIsStripped) {
  auto ev = feed_pieces({"data:  two spaces\n\n"});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, " two spaces");
}

TEST(Sse, UnterminatedFinalEventIsFlushedOnFinish) {
  EXPECT_TRUE(feed_pieces({"data: last"}).empty());
  auto ev = feed_pieces({"data: last"}, /*finish=*/true);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "last");
  auto ev2 = feed_pieces({"data: a\n"}, true);
  ASSERT_EQ(ev2.size(), 1u);
  EXPECT_EQ(ev2[0].data, "a");
}

TEST(Sse, OverlongLineMarksMalformed) {
  SseParser p(16);
  int n = 0;
  auto h = [&](const SseEvent&) { ++n; };
  EXPECT_TRUE(p.feed("data: 0123", h));
  EXPECT_FALSE(p.feed("456789abcdefghij", h));
  EXPECT_TRUE(p.malformed());
  EXPECT_FALSE(p.feed("\n\n", h));
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace tmill::loadgen
