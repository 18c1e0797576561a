// The event-driven transport's request parsing (server/http_parser.h): heads found and parsed,
// limits answered with the right status, chunked bodies decoded across any split.
#include "server/http.h"
#include "server/http_parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace tmill::server;

namespace {

int parse(const std::string& text, RequestHead& head, HttpLimits lim = {}) {
  int status = 0;
  const size_t end = find_head_end(text, lim, &status);
  if (status) return status;
  if (end == 0) return -1;  // incomplete
  return parse_request_head(std::string_view(text).substr(0, end), lim, head);
}

}  // namespace

TEST(HttpParser, ParsesAHead) {
  RequestHead h;
  ASSERT_EQ(parse("GET /v1/a%20b?x=1 HTTP/1.1\r\nHost: x\r\nX-Y:  z \r\n\r\nrest", h), 0);
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.path, "/v1/a b");
  EXPECT_EQ(h.target, "/v1/a%20b?x=1");
  EXPECT_EQ(h.query, "x=1");
  ASSERT_EQ(h.headers.size(), 2u);
  EXPECT_EQ(h.headers[1].second, "z");
  EXPECT_TRUE(h.keep_alive);
  EXPECT_FALSE(h.has_body());
}

TEST(HttpParser, FindsTheEndOnlyWhenComplete) {
  HttpLimits lim;
  int status = 0;
  const std::string req = "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
  for (size_t n = 0; n < req.size() - 2; n++) EXPECT_EQ(find_head_end(req.substr(0, n), lim, &status), 0u) << n;
  EXPECT_EQ(find_head_end(req, lim, &status), req.size() - 2);
  EXPECT_EQ(status, 0);
  // Bare LF line ends and leading empty lines are accepted.
  RequestHead h;
  EXPECT_EQ(parse("\r\nGET / HTTP/1.0\nConnection: keep-alive\n\n", h), 0);
  EXPECT_EQ(h.minor, 0);
  EXPECT_TRUE(h.keep_alive);
}

TEST(HttpParser, Framing) {
  RequestHead h;
  ASSERT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 12\r\nExpect: 100-Continue\r\n\r\n", h), 0);
  EXPECT_EQ(h.content_length.value_or(0), 12u);
  EXPECT_TRUE(h.expect_continue);
  RequestHead c;
  ASSERT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", c), 0);
  EXPECT_TRUE(c.chunked);
  EXPECT_FALSE(c.content_length);  // chunked wins, and the connection closes after
  EXPECT_FALSE(c.keep_alive);
  RequestHead k;
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", k), 0);
  EXPECT_FALSE(k.keep_alive);
  RequestHead o;
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", o), 0);
  EXPECT_FALSE(o.keep_alive);
}

TEST(HttpParser, RejectsMalformed) {
  for (const char* bad : {"GARBAGE\r\n\r\n", "get / HTTP/1.1\r\n\r\n", "GET HTTP/1.1\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
                          "GET  / HTTP/1.1\r\n\r\n", "GET http://x/ HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
                          "GET / HTTP/1.1\r\nA : b\r\n\r\n", "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
                          "POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                          "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                          "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                          "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n"}) {
    RequestHead h;
    EXPECT_EQ(parse(bad, h), 400) << bad;
  }
}

TEST(HttpParser, Limits) {
  HttpLimits lim;
  RequestHead h;
  EXPECT_EQ(parse("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", h), 414);
  EXPECT_EQ(parse("GET /" + std::string(9000, 'a'), h), 414);  // before the line ends
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n", h), 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; i++) many += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(parse(many + "\r\n", h), 431);
  std::string big = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 90; i++) big += "X-" + std::to_string(i) + ": " + std::string(800, 'b') + "\r\n";
  EXPECT_EQ(parse(big, h), 431);  // over 64 KiB of headers, still incomplete
}

TEST(HttpParser, ChunkedBodyAnySplit) {
  const std::string body = "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t step = 1; step <= body.size(); step++) {
    ChunkedDecoder d;
    std::string out;
    size_t pos = 0;
    while (pos < body.size() && !d.done() && !d.error()) pos += d.feed(std::string_view(body).substr(pos, step), out, 1000);
    ASSERT_TRUE(d.done()) << step;
    EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.") << step;
    EXPECT_EQ(body.substr(pos), "NEXT") << step;
  }
}

TEST(HttpParser, ChunkedErrorsAndCap) {
  for (const char* bad : {"ZZ\r\nabc\r\n0\r\n\r\n", "3\r\nabcX\r\n", ";\r\n", "10000000000000000\r\n"}) {
    ChunkedDecoder d;
    std::string out;
    d.feed(bad, out, 1000);
    EXPECT_TRUE(d.error()) << bad;
    EXPECT_FALSE(d.too_large());
  }
  ChunkedDecoder d;
  std::string out;
  d.feed("8\r\n12345678\r\n8\r\n12345678\r\n", out, 10);
  EXPECT_TRUE(d.error());
  EXPECT_TRUE(d.too_large());
  EXPECT_LE(out.size(), 10u);
}

// The query string: kept as sent, its parameters read with form decoding ('+' a space, %XX a byte).
TEST(HttpParser, QueryParameters) {
  RequestHead h;
  ASSERT_EQ(parse("GET /v1/responses/r/input_items?limit=2&order=asc&after=msg%5F1&q=a+b%2Bc&flag&e= HTTP/1.1\r\n\r\n", h), 0);
  EXPECT_EQ(h.path, "/v1/responses/r/input_items");
  HttpRequest r;
  r.query = h.query;
  EXPECT_EQ(r.query_param("limit"), "2");
  EXPECT_EQ(r.query_param("after"), "msg_1");
  EXPECT_EQ(r.query_param("q"), "a b+c");
  EXPECT_EQ(r.query_param("flag"), "");
  EXPECT_EQ(r.query_param("e"), "");
  EXPECT_EQ(r.query_param("missing"), "");
  EXPECT_EQ(percent_decode("a+b%2", false), "a+b%2");  // a path keeps '+'; a cut escape stays
  ASSERT_EQ(parse("GET /x HTTP/1.1\r\n\r\n", h), 0);
  EXPECT_EQ(h.query, "");
}
