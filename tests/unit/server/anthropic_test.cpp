// Anthropic's Messages API (anthropic.h): the request translated to a chat body, the chat result and
// stream translated back; and over loopback on stories260K (routes_anthropic.cpp): text, a forced
// tool call whole and streamed, a tool result round trip, count_tokens, errors, x-api-key.
#include <gtest/gtest.h>

#include <httplib.h>

#include "engine/engine.h"
#include "server/anthropic.h"
#include "server/server.h"
#include "server_http_client.h"
#include "server_test_data.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::server;

namespace {

ApiError translate_err(const json& body) {
  return test::request_error([&] { anthropic_to_chat(body); }, body.dump());
}

const json kWeatherTool = {
    {"name", "get_weather"}, {"description", "The weather in a city"}, {"input_schema", test::weather_schema()}};

}  // namespace

TEST(Anthropic, RequestBecomesAChatBody) {
  const json body = {
      {"model", "m"},
      {"max_tokens", 64},
      {"system", json::array({{{"type", "text"}, {"text", "Be brief."}}, {{"type", "text"}, {"text", "Be kind."}}})},
      {"messages",
       {{{"role", "user"}, {"content", "Weather?"}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "thinking"}, {"thinking", "Use the tool."}, {"signature", "x"}},
           {{"type", "text"}, {"text", "Checking."}},
           {{"type", "tool_use"}, {"id", "t1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", {{{"type", "text"}, {"text", "Sunny"}}}}},
           {{"type", "tool_result"}, {"tool_use_id", "t2"}, {"content", "boom"}, {"is_error", true}},
           {{"type", "text"}, {"text", "Thanks"}}}}}}},
      {"tools", {kWeatherTool}},
      {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}}},
      {"stop_sequences", {"END"}},
      {"temperature", 0.2},
      {"top_k", 5},
      {"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}},
      {"metadata", {{"user_id", "u"}}},
  };
  const json c = anthropic_to_chat(body);
  const json& m = c["messages"];
  ASSERT_EQ(m.size(), 6u) << c.dump(1);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be brief.\nBe kind."}}));
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "Weather?"}}));
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], json::array({{{"type", "text"}, {"text", "Checking."}}}));
  EXPECT_EQ(m[2]["reasoning_content"], "Use the tool.");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "t1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m[2]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  // tool results first, as the chat shape wants them after the assistant's calls, then the user's text
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "Sunny"}}));
  EXPECT_EQ(m[4], json({{"role", "tool"}, {"tool_call_id", "t2"}, {"content", "Error: boom"}}));
  EXPECT_EQ(m[5]["content"][0]["text"], "Thanks");
  EXPECT_EQ(c["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c["tools"][0]["function"]["parameters"], kWeatherTool["input_schema"]);
  EXPECT_EQ(c["tool_choice"], json({{"type", "function"}, {"function", {{"name", "get_weather"}}}}));
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(c["stop"], json({"END"}));
  EXPECT_EQ(c["max_tokens"], 64);
  EXPECT_EQ(c["top_k"], 5);
  EXPECT_EQ(c["model"], "m");
  EXPECT_EQ(c["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_FALSE(c.contains("stream_options"));
  EXPECT_FALSE(c.contains("metadata"));
  // the other tool_choice types; a stream asks for usage on every chunk
  for (const auto& [type, want] : std::vector<std::pair<std::string, json>>{{"auto", "auto"}, {"any", "required"},
                                                                           {"none", "none"}})
    EXPECT_EQ(anthropic_to_chat({{"messages", json::array()}, {"tool_choice", {{"type", type}}}})["tool_choice"], want);
  const json s = anthropic_to_chat({{"messages", json::array()}, {"stream", true}});
  EXPECT_EQ(s["stream_options"], json({{"include_usage", true}, {"continuous_usage_stats", true}}));
}

TEST(Anthropic, UntranslatableRequestsAre400NamingTheField) {
  const json img = {{"type", "image"}, {"source", {{"type", "base64"}, {"data", "AA"}}}};
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), ""},
      {json::object(), "messages"},
      {{{"messages", {{{"role", "user"}, {"content", {img}}}}}}, "messages"},
      {{{"messages", {{{"role", "system"}, {"content", "x"}}}}}, "messages"},
      {{{"messages", {{{"role", "user"}}}}}, "messages"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}}}}}}}}, "messages"},
      {{{"messages", {{{"role", "assistant"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "a"}}}}}}}}, "messages"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}}, "messages"},
      {{{"messages", json::array()}, {"system", 5}}, "system"},
      {{{"messages", json::array()}, {"system", {img}}}, "system"},
      {{{"messages", json::array()}, {"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}, "tools"},
      {{{"messages", json::array()}, {"tools", {{{"description", "no name"}}}}}, "tools"},
      {{{"messages", json::array()}, {"tool_choice", {{"type", "tool"}}}}, "tool_choice"},
      {{{"messages", json::array()}, {"tool_choice", "auto"}}, "tool_choice"},
      {{{"messages", json::array()}, {"thinking", {{"type", "sometimes"}}}}, "thinking"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError e = translate_err(body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump();
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(Anthropic, ChatResultBecomesAMessage) {
  const json chat = {
      {"id", "chatcmpl-abc"},
      {"model", "m"},
      {"choices",
       {{{"index", 0},
         {"message",
          {{"role", "assistant"},
           {"content", "Sure."},
           {"reasoning_content", "thinking it over"},
           {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                            {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Rome\"}"}}}}}}}},
         {"finish_reason", "tool_calls"},
         {"stop_reason", nullptr}}}},
      {"usage", {{"prompt_tokens", 30}, {"completion_tokens", 7}, {"prompt_tokens_details", {{"cached_tokens", 16}}}}}};
  const json a = chat_to_anthropic(chat);
  EXPECT_EQ(a["id"], "msg_abc");
  EXPECT_EQ(a["type"], "message");
  EXPECT_EQ(a["role"], "assistant");
  ASSERT_EQ(a["content"].size(), 3u);
  EXPECT_EQ(a["content"][0], json({{"type", "thinking"}, {"thinking", "thinking it over"}, {"signature", ""}}));
  EXPECT_EQ(a["content"][1], json({{"type", "text"}, {"text", "Sure."}}));
  EXPECT_EQ(a["content"][2],
            json({{"type", "tool_use"}, {"id", "call_1"}, {"name", "get_weather"}, {"input", {{"city", "Rome"}}}}));
  EXPECT_EQ(a["stop_reason"], "tool_use");
  EXPECT_EQ(a["stop_sequence"], nullptr);
  EXPECT_EQ(a["usage"]["input_tokens"], 14);
  EXPECT_EQ(a["usage"]["cache_read_input_tokens"], 16);
  EXPECT_EQ(a["usage"]["output_tokens"], 7);
  // the other stop reasons
  json c = chat;
  c["choices"][0]["finish_reason"] = "stop";
  c["choices"][0]["stop_reason"] = "END";
  EXPECT_EQ(chat_to_anthropic(c)["stop_reason"], "stop_sequence");
  EXPECT_EQ(chat_to_anthropic(c)["stop_sequence"], "END");
  c["choices"][0]["stop_reason"] = nullptr;
  EXPECT_EQ(chat_to_anthropic(c)["stop_reason"], "end_turn");
  c["choices"][0]["finish_reason"] = "length";
  EXPECT_EQ(chat_to_anthropic(c)["stop_reason"], "max_tokens");
  // errors
  ApiError e;
  e.status = 429;
  e.message = "slow down";
  EXPECT_EQ(anthropic_error(e), json({{"type", "error"}, {"error", {{"type", "rate_limit_error"}, {"message", "slow down"}}}}));
  e.status = 404;
  EXPECT_EQ(anthropic_error(e)["error"]["type"], "not_found_error");
}

TEST(Anthropic, StreamTranslatorOpensAndClosesBlocksInOrder) {
  AnthropicStream s;
  auto chunk = [](json delta, json finish = nullptr, json stop_reason = nullptr) {
    return json{{"id", "chatcmpl-x"},
                {"model", "m"},
                {"choices", {{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish}, {"stop_reason", stop_reason}}}},
                {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 3}}}};
  };
  std::string sse;
  sse += s.chunk(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += s.chunk(chunk({{"reasoning_content", "hmm"}}));
  sse += s.chunk(chunk({{"content", "Hi"}}));
  sse += s.chunk(chunk({{"content", " there"}}));
  sse += s.chunk(chunk({{"tool_calls", {{{"index", 0}, {"id", "c1"}, {"type", "function"},
                                          {"function", {{"name", "f"}, {"arguments", "{\"a\""}}}}}}}));
  sse += s.chunk(chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", ":1}"}}}}}}}));
  sse += s.chunk(chunk({{"tool_calls", {{{"index", 1}, {"id", "c2"}, {"function", {{"name", "g"}, {"arguments", "{}"}}}}}}}));
  sse += s.chunk(chunk(json::object(), "tool_calls"));
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.chunk(chunk({{"content", "late"}})), "");  // nothing after message_stop
  const auto ev = test::named_events(sse);
  std::vector<std::string> names;
  for (const auto& [n, d] : ev) names.push_back(n);
  const std::vector<std::string> want = {
      "message_start",       "content_block_start", "content_block_delta", "content_block_stop",  // thinking
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",  // text
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",  // tool c1
      "content_block_start", "content_block_delta", "content_block_stop",                         // tool c2
      "message_delta",       "message_stop"};
  ASSERT_EQ(names, want) << sse;
  EXPECT_EQ(ev[0].second["message"]["usage"]["input_tokens"], 12);
  EXPECT_EQ(ev[1].second["content_block"]["type"], "thinking");
  EXPECT_EQ(ev[2].second["delta"], json({{"type", "thinking_delta"}, {"thinking", "hmm"}}));
  EXPECT_EQ(ev[4].second["index"], 1);
  EXPECT_EQ(ev[6].second["delta"], json({{"type", "text_delta"}, {"text", " there"}}));
  EXPECT_EQ(ev[8].second["content_block"],
            json({{"type", "tool_use"}, {"id", "c1"}, {"name", "f"}, {"input", json::object()}}));
  EXPECT_EQ(ev[9].second["delta"]["partial_json"].get<std::string>() + ev[10].second["delta"]["partial_json"].get<std::string>(),
            "{\"a\":1}");
  EXPECT_EQ(ev[12].second["index"], 3);
  EXPECT_EQ(ev[15].second["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(ev[15].second["usage"]["output_tokens"], 3);
  // an error event ends the stream
  AnthropicStream t;
  const auto err = test::named_events(t.error({{"error", {{"message", "too slow"}, {"code", "request_timeout"}}}}));
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].second["error"]["message"], "too slow");
  EXPECT_TRUE(t.finished());
}

namespace {

std::unique_ptr<Server> make_server(std::vector<std::string> keys = {}) {
  ServerOptions o;
  o.api_keys = std::move(keys);
  return test::stories_server(o);
}

using test::post_json;

}  // namespace

TEST(AnthropicServer, TextWholeAndStreamedMatchTheChatRoute) {
  auto srv = make_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json msgs = {{{"role", "user"}, {"content", "Once upon a time"}}};
  const json chat = post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 16}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  const json a = post_json(cli, "/v1/messages",
                      {{"model", "stories260K"}, {"messages", msgs}, {"max_tokens", 16}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200) << a.dump();
  EXPECT_EQ(a["type"], "message");
  ASSERT_EQ(a["content"].size(), 1u);
  EXPECT_EQ(a["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(a["stop_reason"], "max_tokens");
  EXPECT_EQ(a["usage"]["output_tokens"], 16);
  EXPECT_EQ(a["usage"]["input_tokens"].get<int64_t>() + a["usage"]["cache_read_input_tokens"].get<int64_t>(),
            chat["usage"]["prompt_tokens"].get<int64_t>());
  auto r = cli.Post("/v1/messages",
                    json({{"messages", msgs}, {"max_tokens", 16}, {"temperature", 0}, {"stream", true}}).dump(),
                    "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find("[DONE]"), std::string::npos);
  const auto ev = test::named_events(r->body);
  ASSERT_GE(ev.size(), 5u) << r->body;
  EXPECT_EQ(ev.front().first, "message_start");
  EXPECT_EQ(ev.back().first, "message_stop");
  std::string text;
  for (const auto& [n, d] : ev)
    if (n == "content_block_delta") text += d["delta"]["text"].get<std::string>();
  EXPECT_EQ(text, a["content"][0]["text"]);
  EXPECT_EQ(ev[ev.size() - 2].second["usage"]["output_tokens"], 16);
  // count_tokens: the prompt the chat route would compute
  const json n = post_json(cli, "/v1/messages/count_tokens", {{"messages", msgs}}, &status);
  ASSERT_EQ(status, 200) << n.dump();
  EXPECT_EQ(n["input_tokens"], chat["usage"]["prompt_tokens"]);
  // errors in Anthropic's shape
  const json bad = post_json(cli, "/v1/messages", {{"messages", {{{"role", "user"}, {"content", {{{"type", "image"}}}}}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["type"], "error");
  EXPECT_EQ(bad["error"]["type"], "invalid_request_error");
  const json other = post_json(cli, "/v1/messages", {{"model", "claude-x"}, {"messages", msgs}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(other["error"]["type"], "not_found_error");
  srv->shutdown(5);
}

TEST(AnthropicServer, ForcedToolUseWholeStreamedAndItsResultRoundTrip) {
  auto srv = make_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json msgs = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  const json a = post_json(cli, "/v1/messages",
                      {{"messages", msgs}, {"max_tokens", 60}, {"temperature", 0}, {"tools", {kWeatherTool}},
                       {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}},
                      &status);
  ASSERT_EQ(status, 200) << a.dump();
  json use;
  for (const json& b : a["content"])
    if (b["type"] == "tool_use" && use.is_null()) use = b;
  ASSERT_FALSE(use.is_null()) << a.dump();
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "get_weather");
  ASSERT_TRUE(use["input"].is_object());
  const std::string city = use["input"].value("city", "");
  EXPECT_TRUE(city == "Paris" || city == "Rome") << use.dump();
  // streamed: one tool_use block whose input_json_delta pieces make the same input
  auto r = cli.Post("/v1/messages",
                    json({{"messages", msgs}, {"max_tokens", 60}, {"temperature", 0}, {"tools", {kWeatherTool}},
                          {"tool_choice", {{"type", "any"}}}, {"stream", true}})
                        .dump(),
                    "application/json");
  ASSERT_TRUE(r);
  const auto ev = test::named_events(r->body);
  std::string args;
  int tool_blocks = 0;
  for (const auto& [n, d] : ev) {
    if (n == "content_block_start" && d["content_block"]["type"] == "tool_use") {
      ++tool_blocks;
      EXPECT_EQ(d["content_block"]["name"], "get_weather");
    }
    if (n == "content_block_delta" && d["delta"]["type"] == "input_json_delta" && tool_blocks == 1)
      args += d["delta"]["partial_json"].get<std::string>();
  }
  EXPECT_GE(tool_blocks, 1) << r->body;
  EXPECT_EQ(json::parse(args), use["input"]) << r->body;
  // the call and its result sent back: the chat template renders both, and the model answers
  const json turn2 = {msgs[0],
                      {{"role", "assistant"}, {"content", {use}}},
                      {{"role", "user"},
                       {"content", {{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "Sunny, 21 C"}}}}}};
  const json b = post_json(cli, "/v1/messages", {{"messages", turn2}, {"max_tokens", 5}, {"tools", {kWeatherTool}}}, &status);
  ASSERT_EQ(status, 200) << b.dump();
  const json n1 = post_json(cli, "/v1/messages/count_tokens", {{"messages", msgs}, {"tools", {kWeatherTool}}}, &status);
  const json n2 = post_json(cli, "/v1/messages/count_tokens", {{"messages", turn2}, {"tools", {kWeatherTool}}}, &status);
  EXPECT_GT(n2["input_tokens"].get<int64_t>(), n1["input_tokens"].get<int64_t>() + 5);  // the call and result are in it
  srv->shutdown(5);
}

TEST(AnthropicServer, XApiKeyAuthenticates) {
  auto srv = make_server({"sekret"});
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  const std::string body = json({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}}).dump();
  auto none = cli.Post("/v1/messages", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  auto wrong = cli.Post("/v1/messages", httplib::Headers{{"x-api-key", "nope"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto ok = cli.Post("/v1/messages", httplib::Headers{{"x-api-key", "sekret"}}, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // the same key on the OpenAI routes, as llama-server takes it
  auto models = cli.Get("/v1/models", httplib::Headers{{"X-Api-Key", "sekret"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  srv->shutdown(5);
}
