// What the HTTP-level server tests share: a stories260K server on a free port, a JSON POST, and the
// parsed events of an SSE body (llama-server's "data:" events, or Anthropic's and the Responses
// API's "event:" + "data:" pairs).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>

#include "server/server.h"
#include "server_test_engine.h"

namespace tmill::test {

// The RequestError `f` throws (a failed expectation when it throws none).
template <class F>
server::ApiError request_error(F&& f, const std::string& what) {
  try {
    f();
  } catch (const server::RequestError& e) {
    return e.error;
  }
  ADD_FAILURE() << "accepted: " << what;
  return {};
}

// A server on stories260K (options' port, model path and version set here), ready, or null.
inline std::unique_ptr<server::Server> stories_server(server::ServerOptions o = {}, int max_num_seqs = 8) {
  o.http.port = 0;
  o.model_path = stories_model();
  o.version = "test";
  auto s = server::Server::create(o);
  EXPECT_TRUE(s.ok()) << s.error();
  if (!s.ok()) return nullptr;
  EXPECT_TRUE((*s)->attach_engine(stories_engine(1, max_num_seqs), 0).ok());
  return std::move(s).value();
}

// POSTs `body`; the answer's JSON, its status in *status.
inline server::json post_json(httplib::Client& cli, const std::string& path, const server::json& body, int* status) {
  auto r = cli.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r) << path;
  if (!r) return server::json();
  *status = r->status;
  return server::json::parse(r->body);
}

// "data: {...}" events ("data: [DONE]" sets *done instead).
inline std::vector<server::json> data_events(const std::string& body, bool* done) {
  std::vector<server::json> out;
  *done = false;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    if (data == "[DONE]") *done = true;
    else out.push_back(server::json::parse(data));
    at = end;
  }
  return out;
}

// "event: NAME\ndata: {...}" pairs; each data's "type" is its event's name.
inline std::vector<std::pair<std::string, server::json>> named_events(const std::string& sse) {
  std::vector<std::pair<std::string, server::json>> out;
  size_t at = 0;
  while ((at = sse.find("event: ", at)) != std::string::npos) {
    const size_t nl = sse.find('\n', at);
    const std::string name = sse.substr(at + 7, nl - at - 7);
    EXPECT_EQ(sse.compare(nl + 1, 6, "data: "), 0);
    const size_t end = sse.find("\n\n", nl);
    const server::json data = server::json::parse(sse.substr(nl + 7, end - nl - 7));
    EXPECT_EQ(data["type"], name);
    out.emplace_back(name, data);
    at = end;
  }
  return out;
}

}  // namespace tmill::test
