// OpenAI's Responses API (responses.h): the request translated to a chat body, the chat result and
// stream translated back; and over loopback on stories260K (routes_anthropic.cpp): text whole and
// streamed against the chat route, a forced function call, its output round trip, structured output,
// the refusals.
#include <gtest/gtest.h>

#include <httplib.h>

#include "engine/engine.h"
#include "server/response_store.h"
#include "server/responses.h"
#include "server/server.h"
#include "server_http_client.h"
#include "server_test_data.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::server;

namespace {

ApiError translate_err(const json& body) {
  return test::request_error([&] { responses_to_chat(body); }, body.dump());
}

std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  auto out = test::named_events(sse);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].second["sequence_number"], i);
  return out;
}

const json kWeatherTool = {{"type", "function"},
                           {"name", "get_weather"},
                           {"description", "The weather in a city"},
                           {"parameters", test::weather_schema()}};

}  // namespace

TEST(Responses, RequestBecomesAChatBody) {
  const json body = {
      {"model", "m"},
      {"instructions", "Be brief."},
      {"input",
       {{{"role", "user"}, {"content", "Weather?"}},
        {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", {{{"type", "summary_text"}, {"text", "use the tool"}}}}},
        {{"type", "message"}, {"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", "Checking."}}}}},
        {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"}, {"arguments", "{\"city\":\"Rome\"}"}},
        {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "Sunny"}},
        {{"role", "developer"}, {"content", {{{"type", "input_text"}, {"text", "Answer in French."}}}}}}},
      {"tools", {kWeatherTool}},
      {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
      {"parallel_tool_calls", false},
      {"max_output_tokens", 50},
      {"temperature", 0.3},
      {"text", {{"format", {{"type", "json_schema"}, {"name", "w"}, {"schema", {{"type", "object"}}}, {"strict", true}}}}},
      {"reasoning", {{"effort", "low"}}},
      {"truncation", "auto"},
      {"store", true},
      {"metadata", {{"k", "v"}}},
  };
  const json c = responses_to_chat(body);
  const json& m = c["messages"];
  ASSERT_EQ(m.size(), 5u) << c.dump(1);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "Weather?"}}));
  // the reasoning, the message and the call are one assistant turn
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["reasoning_content"], "use the tool");
  EXPECT_EQ(m[2]["content"], json::array({{{"type", "text"}, {"text", "Checking."}}}));
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Rome\"}");
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "Sunny"}}));
  EXPECT_EQ(m[4]["role"], "developer");
  EXPECT_EQ(c["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c["tools"][0]["function"]["parameters"], kWeatherTool["parameters"]);
  EXPECT_EQ(c["tool_choice"], json({{"type", "function"}, {"function", {{"name", "get_weather"}}}}));
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(c["max_tokens"], 50);
  EXPECT_EQ(c["response_format"]["type"], "json_schema");
  EXPECT_EQ(c["response_format"]["json_schema"]["name"], "w");
  EXPECT_EQ(c["reasoning_effort"], "low");
  EXPECT_EQ(c["truncation"], "auto");
  EXPECT_FALSE(c.contains("store"));
  // a string input is one user message; text.format json_object; a stream asks for usage on every chunk
  const json s = responses_to_chat({{"input", "Hi"}, {"text", {{"format", {{"type", "json_object"}}}}}, {"stream", true}});
  EXPECT_EQ(s["messages"], json::array({{{"role", "user"}, {"content", "Hi"}}}));
  EXPECT_EQ(s["response_format"], json({{"type", "json_object"}}));
  EXPECT_EQ(s["stream_options"], json({{"include_usage", true}, {"continuous_usage_stats", true}}));
  // the settings a response echoes
  const json st = response_settings(body, true);
  EXPECT_EQ(st["instructions"], "Be brief.");
  EXPECT_EQ(st["max_output_tokens"], 50);
  EXPECT_EQ(st["store"], true);
  EXPECT_EQ(st["previous_response_id"], nullptr);
  EXPECT_EQ(response_settings({{"input", "x"}, {"previous_response_id", "resp_1"}}, false)["previous_response_id"],
            "resp_1");
  EXPECT_EQ(response_settings(body, false)["store"], false);
  EXPECT_EQ(st["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(response_settings({{"input", "x"}}, true)["tool_choice"], "auto");
}

TEST(Responses, UntranslatableRequestsAre400NamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), ""},
      {json::object(), "input"},
      {{{"input", 5}}, "input"},
      {{{"input", "x"}, {"conversation", "conv_1"}}, "conversation"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "http://x"}}}}}}}}, "input"},
      {{{"input", {{{"role", "tool"}, {"content", "x"}}}}}, "input"},
      {{{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}}, "input"},
      {{{"input", {{{"type", "function_call"}, {"name", "f"}}}}}, "input"},
      {{{"input", {{{"type", "web_search_call"}}}}}, "input"},
      {{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}, "tools"},
      {{{"input", "x"}, {"tools", {{{"type", "function"}}}}}, "tools"},
      {{{"input", "x"}, {"tool_choice", {{"type", "file_search"}}}}, "tool_choice"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "xml"}}}}}}, "text"},
      {{{"input", "x"}, {"instructions", 5}}, "instructions"},
      {{{"input", "x"}, {"reasoning", "high"}}, "reasoning"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError e = translate_err(body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump();
  }
}

TEST(Responses, ChatResultBecomesAResponse) {
  json chat = {
      {"id", "chatcmpl-abc"},
      {"created", 1700000000},
      {"model", "m"},
      {"choices",
       {{{"index", 0},
         {"message",
          {{"role", "assistant"},
           {"content", "Sure."},
           {"reasoning_content", "hmm"},
           {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                            {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Rome\"}"}}}}}}}},
         {"finish_reason", "tool_calls"}}}},
      {"usage", {{"prompt_tokens", 30}, {"completion_tokens", 7}, {"prompt_tokens_details", {{"cached_tokens", 16}}}}}};
  const json r = chat_to_response(chat, response_settings({{"input", "x"}, {"max_output_tokens", 9}}, false));
  EXPECT_EQ(r["id"], "resp_abc");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["created_at"], 1700000000);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["incomplete_details"], nullptr);
  EXPECT_EQ(r["max_output_tokens"], 9);
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "hmm");
  EXPECT_EQ(r["output"][1]["type"], "message");
  EXPECT_EQ(r["output"][1]["content"][0], json({{"type", "output_text"}, {"text", "Sure."}, {"annotations", json::array()},
                                                 {"logprobs", json::array()}}));
  EXPECT_EQ(r["output"][2]["type"], "function_call");
  EXPECT_EQ(r["output"][2]["call_id"], "call_1");
  EXPECT_EQ(r["output"][2]["name"], "get_weather");
  EXPECT_EQ(r["output"][2]["arguments"], "{\"city\":\"Rome\"}");
  EXPECT_EQ(r["usage"], json({{"input_tokens", 30}, {"input_tokens_details", {{"cached_tokens", 16}}},
                              {"output_tokens", 7}, {"output_tokens_details", {{"reasoning_tokens", 0}}},
                              {"total_tokens", 37}}));
  chat["choices"][0]["finish_reason"] = "length";
  const json inc = chat_to_response(chat, response_settings({{"input", "x"}}, false));
  EXPECT_EQ(inc["status"], "incomplete");
  EXPECT_EQ(inc["incomplete_details"]["reason"], "max_output_tokens");
}

TEST(Responses, StreamTranslatorEventsAndItems) {
  ResponsesStream s(response_settings({{"input", "x"}}, false));
  auto chunk = [](json delta, json finish = nullptr) {
    return json{{"id", "chatcmpl-x"},
                {"model", "m"},
                {"created", 5},
                {"choices", {{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish}}}},
                {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 3}}}};
  };
  std::string sse;
  sse += s.chunk(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += s.chunk(chunk({{"reasoning_content", "hm"}}));
  sse += s.chunk(chunk({{"content", "Hi"}}));
  sse += s.chunk(chunk({{"content", "!"}}));
  sse += s.chunk(chunk({{"tool_calls", {{{"index", 0}, {"id", "c1"}, {"function", {{"name", "f"}, {"arguments", "{\"a\""}}}}}}}));
  sse += s.chunk(chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", ":1}"}}}}}}}));
  sse += s.chunk(chunk(json::object(), "tool_calls"));
  EXPECT_TRUE(s.finished());
  const auto ev = events_of(sse);
  std::vector<std::string> names;
  for (const auto& [n, d] : ev) names.push_back(n);
  const std::vector<std::string> want = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  ASSERT_EQ(names, want) << sse;
  EXPECT_EQ(ev[0].second["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].second["response"]["id"], "resp_x");
  EXPECT_EQ(ev[10].second["text"], "Hi!");
  EXPECT_EQ(ev[12].second["output_index"], 1);
  EXPECT_EQ(ev[13].second["item"]["call_id"], "c1");
  EXPECT_EQ(ev[16].second["arguments"], "{\"a\":1}");
  const json& done = ev.back().second["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(done["usage"]["output_tokens"], 3);
  // length: response.incomplete
  ResponsesStream t(response_settings({{"input", "x"}}, false));
  const auto inc = events_of(t.chunk(chunk({{"content", "a"}}, "length")));
  EXPECT_EQ(inc.back().first, "response.incomplete");
  EXPECT_EQ(inc.back().second["response"]["incomplete_details"]["reason"], "max_output_tokens");
  // an error event
  ResponsesStream e(response_settings({{"input", "x"}}, false));
  const auto err = events_of(e.error({{"error", {{"message", "late"}, {"code", "request_timeout"}}}}));
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].first, "error");
  EXPECT_EQ(err[0].second["code"], "request_timeout");
}

TEST(ResponsesServer, TextFunctionCallsAndStructuredOutput) {
  auto srv = test::stories_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json msgs = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Once upon a time"}}};
  const json chat = test::post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  const json r = test::post_json(cli, "/v1/responses",
                      {{"instructions", "Be brief."}, {"input", "Once upon a time"}, {"max_output_tokens", 12},
                       {"temperature", 0}},
                      &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "incomplete");
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  // streamed: the deltas make the same text, and the last event carries the whole response
  auto s = cli.Post("/v1/responses",
                    json({{"instructions", "Be brief."}, {"input", "Once upon a time"}, {"max_output_tokens", 12},
                          {"temperature", 0}, {"stream", true}})
                        .dump(),
                    "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  EXPECT_EQ(s->body.find("[DONE]"), std::string::npos);
  const auto ev = events_of(s->body);
  std::string text;
  for (const auto& [n, d] : ev)
    if (n == "response.output_text.delta") text += d["delta"].get<std::string>();
  EXPECT_EQ(text, r["output"][0]["content"][0]["text"]);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().first, "response.incomplete");
  EXPECT_EQ(ev.back().second["response"]["output"][0]["content"][0]["text"], text);
  // a forced function call, then its output sent back
  const json call = test::post_json(cli, "/v1/responses",
                         {{"input", "Weather in Paris?"}, {"tools", {kWeatherTool}}, {"tool_choice", "required"},
                          {"max_output_tokens", 60}, {"temperature", 0}},
                         &status);
  ASSERT_EQ(status, 200) << call.dump();
  json fc;
  for (const json& item : call["output"])
    if (item["type"] == "function_call" && fc.is_null()) fc = item;
  ASSERT_FALSE(fc.is_null()) << call.dump();
  EXPECT_EQ(fc["name"], "get_weather");
  const std::string city = json::parse(fc["arguments"].get<std::string>()).value("city", "");
  EXPECT_TRUE(city == "Paris" || city == "Rome") << fc.dump();
  const json next = test::post_json(cli, "/v1/responses",
                         {{"input", {{{"role", "user"}, {"content", "Weather in Paris?"}},
                                     fc,
                                     {{"type", "function_call_output"}, {"call_id", fc["call_id"]}, {"output", "Sunny"}}}},
                          {"tools", {kWeatherTool}}, {"max_output_tokens", 5}},
                         &status);
  EXPECT_EQ(status, 200) << next.dump();
  EXPECT_GT(next["usage"]["input_tokens"].get<int64_t>(), call["usage"]["input_tokens"].get<int64_t>());
  // text.format json_schema: the message is JSON of the schema
  const json js = test::post_json(cli, "/v1/responses",
                       {{"input", "A city?"},
                        {"text", {{"format", {{"type", "json_schema"}, {"name", "c"},
                                              {"schema", {{"type", "object"},
                                                          {"properties", {{"city", {{"enum", {"Paris", "Rome"}}}}}},
                                                          {"required", {"city"}},
                                                          {"additionalProperties", false}}}}}}},
                        {"max_output_tokens", 40}, {"temperature", 0}},
                       &status);
  ASSERT_EQ(status, 200) << js.dump();
  const json parsed = json::parse(js["output"].back()["content"][0]["text"].get<std::string>());
  EXPECT_TRUE(parsed["city"] == "Paris" || parsed["city"] == "Rome") << parsed.dump();
  // a previous response this server never stored
  const json prev = test::post_json(cli, "/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_1"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(prev["error"]["param"], "previous_response_id");
  EXPECT_EQ(prev["error"]["code"], "previous_response_not_found");
  srv->shutdown(5);
}

// Stored responses: previous_response_id continues one (the same greedy answer as the chat route given
// the whole conversation), streamed ones are kept too, GET returns it, input_items lists what it
// answered (newest first, paged), DELETE drops it; store false, or a server keeping none, keeps nothing.
TEST(ResponsesServer, StoredResponsesContinueConversations) {
  auto srv = test::stories_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json first = test::post_json(cli, "/v1/responses",
                                     {{"instructions", "Be brief."}, {"input", "Once upon a time"},
                                      {"max_output_tokens", 8}, {"temperature", 0}},
                                     &status);
  ASSERT_EQ(status, 200) << first.dump();
  EXPECT_EQ(first["store"], true);
  const std::string said = first["output"][0]["content"][0]["text"];
  const json second = test::post_json(cli, "/v1/responses",
                                      {{"previous_response_id", first["id"]}, {"input", "There was a cat"},
                                       {"max_output_tokens", 8}, {"temperature", 0}},
                                      &status);
  ASSERT_EQ(status, 200) << second.dump();
  EXPECT_EQ(second["previous_response_id"], first["id"]);
  // instructions are not carried over (as OpenAI's): the conversation's turns are
  const json chat = test::post_json(cli, "/v1/chat/completions",
                                    {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}},
                                                   {{"role", "assistant"}, {"content", said}},
                                                   {{"role", "user"}, {"content", "There was a cat"}}}},
                                     {"max_tokens", 8}, {"temperature", 0}},
                                    &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(second["output"][0]["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(second["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  // a streamed continuation is stored as well, and continues the chain
  auto s = cli.Post("/v1/responses",
                    json({{"previous_response_id", second["id"]}, {"input", "The end"}, {"max_output_tokens", 4},
                          {"temperature", 0}, {"stream", true}})
                        .dump(),
                    "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  const auto ev = events_of(s->body);
  ASSERT_FALSE(ev.empty());
  const json third = ev.back().second["response"];
  auto got = cli.Get("/v1/responses/" + third["id"].get<std::string>());
  ASSERT_TRUE(got);
  ASSERT_EQ(got->status, 200) << got->body;
  EXPECT_EQ(json::parse(got->body), third);
  // its input items: the whole conversation it answered, newest first, with ids; paged
  auto items = cli.Get("/v1/responses/" + third["id"].get<std::string>() + "/input_items");
  ASSERT_TRUE(items);
  ASSERT_EQ(items->status, 200) << items->body;
  const json list = json::parse(items->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 5u) << list.dump();  // user, assistant, user, assistant, user
  EXPECT_EQ(list["data"][0]["content"][0]["text"], "The end");
  EXPECT_EQ(list["data"][4]["content"][0]["text"], "Once upon a time");
  EXPECT_EQ(list["has_more"], false);
  for (const json& item : list["data"]) EXPECT_TRUE(item.contains("id")) << item.dump();
  auto page = cli.Get("/v1/responses/" + third["id"].get<std::string>() + "/input_items?limit=2&order=asc&after=" +
                      list["data"][4]["id"].get<std::string>());
  ASSERT_TRUE(page);
  const json p2 = json::parse(page->body);
  ASSERT_EQ(p2["data"].size(), 2u) << p2.dump();
  EXPECT_EQ(p2["data"][0]["id"], list["data"][3]["id"]);
  EXPECT_EQ(p2["has_more"], true);
  EXPECT_EQ(cli.Get("/v1/responses/" + third["id"].get<std::string>() + "/input_items?limit=0")->status, 400);
  // item_reference: a stored item (here first's output message) named by id, in its place
  const json inlined = test::post_json(cli, "/v1/responses",
                                       {{"input", {first["output"][0], {{"role", "user"}, {"content", "And then"}}}},
                                        {"max_output_tokens", 4}, {"temperature", 0}},
                                       &status);
  ASSERT_EQ(status, 200) << inlined.dump();
  const json referenced = test::post_json(
      cli, "/v1/responses",
      {{"input", {{{"type", "item_reference"}, {"id", first["output"][0]["id"]}}, {{"role", "user"}, {"content", "And then"}}}},
       {"max_output_tokens", 4}, {"temperature", 0}},
      &status);
  ASSERT_EQ(status, 200) << referenced.dump();
  EXPECT_EQ(referenced["usage"]["input_tokens"], inlined["usage"]["input_tokens"]);
  EXPECT_EQ(referenced["output"][0]["content"][0]["text"], inlined["output"][0]["content"][0]["text"]);
  const json unknown = test::post_json(cli, "/v1/responses", {{"input", {{{"type", "item_reference"}, {"id", "msg_nope"}}}}},
                                       &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(unknown["error"]["param"], "input");
  // DELETE drops it: GET and previous_response_id find nothing after
  auto del = cli.Delete("/v1/responses/" + second["id"].get<std::string>());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  EXPECT_EQ(json::parse(del->body), json({{"id", second["id"]}, {"object", "response"}, {"deleted", true}}));
  EXPECT_EQ(cli.Get("/v1/responses/" + second["id"].get<std::string>())->status, 404);
  EXPECT_EQ(cli.Delete("/v1/responses/" + second["id"].get<std::string>())->status, 404);
  test::post_json(cli, "/v1/responses", {{"previous_response_id", second["id"]}, {"input", "x"}}, &status);
  EXPECT_EQ(status, 400);
  // store false: not kept
  const json unstored = test::post_json(cli, "/v1/responses", {{"input", "x"}, {"store", false}, {"max_output_tokens", 2}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(unstored["store"], false);
  EXPECT_EQ(cli.Get("/v1/responses/" + unstored["id"].get<std::string>())->status, 404);
  test::post_json(cli, "/v1/responses", {{"input", "x"}, {"store", "yes"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(cli.Post("/v1/responses/" + first["id"].get<std::string>(), "{}", "application/json")->status, 405);
  auto m = cli.Get("/metrics");  // first, third and the two item_reference ones (second deleted, one unstored)
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("\ntokenmill:stored_responses 4\n"), std::string::npos) << m->body.substr(0, 400);
  srv->shutdown(5);
  // with API keys, a response is its key's: another key's GET, DELETE and previous_response_id find nothing
  server::ServerOptions keyed;
  keyed.api_keys = {"k1", "k2"};
  auto srvk = test::stories_server(keyed);
  ASSERT_TRUE(srvk);
  httplib::Client k1("127.0.0.1", srvk->port()), k2("127.0.0.1", srvk->port());
  k1.set_bearer_token_auth("k1");
  k2.set_bearer_token_auth("k2");
  const json mine = test::post_json(k1, "/v1/responses", {{"input", "x"}, {"max_output_tokens", 2}}, &status);
  ASSERT_EQ(status, 200) << mine.dump();
  const std::string path = "/v1/responses/" + mine["id"].get<std::string>();
  EXPECT_EQ(k2.Get(path)->status, 404);
  EXPECT_EQ(k2.Delete(path)->status, 404);
  test::post_json(k2, "/v1/responses", {{"input", "y"}, {"previous_response_id", mine["id"]}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(k1.Get(path)->status, 200);
  test::post_json(k1, "/v1/responses", {{"input", "y"}, {"previous_response_id", mine["id"]}, {"max_output_tokens", 2}}, &status);
  EXPECT_EQ(status, 200);
  srvk->shutdown(5);
  // a server keeping none says so
  server::ServerOptions none;
  none.max_stored_responses = 0;
  auto srv0 = test::stories_server(none);
  ASSERT_TRUE(srv0);
  httplib::Client c0("127.0.0.1", srv0->port());
  const json r0 = test::post_json(c0, "/v1/responses", {{"input", "x"}, {"max_output_tokens", 2}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r0["store"], false);
  const json e0 = test::post_json(c0, "/v1/responses", {{"input", "x"}, {"previous_response_id", r0["id"]}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(e0["error"]["message"].get<std::string>().find("--max-stored-responses 0"), std::string::npos) << e0.dump();
  srv0->shutdown(5);
}

// The store itself: bounded by count and bytes, least recently used dropped first, ids given to
// input items, a response past the byte bound not kept.
TEST(ResponseStore, BoundedLruWithIds) {
  auto resp = [](const std::string& id, size_t pad = 0) {
    return json{{"id", id}, {"object", "response"}, {"output", json::array()}, {"pad", std::string(pad, 'x')}};
  };
  const json items = json::array({{{"type", "message"}, {"role", "user"}, {"content", "hi"}}});
  ResponseStore s(2, 1 << 20);
  s.put(resp("resp_a"), items);
  s.put(resp("resp_b"), items);
  ASSERT_TRUE(s.get("resp_a"));  // a is now the most recently used
  s.put(resp("resp_c"), items);
  EXPECT_FALSE(s.get("resp_b"));
  EXPECT_TRUE(s.get("resp_a"));
  EXPECT_TRUE(s.get("resp_c"));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.get("resp_c")->input_items[0]["id"], "msg_c_0");
  const json out = json::array({{{"type", "message"}, {"role", "assistant"}, {"content", "yo"}}});
  json r = resp("resp_d");
  r["output"] = out;
  s.put(r, items);
  EXPECT_EQ(continued_items(*s.get("resp_d")).size(), 2u);
  ResponseStore small(10, 400);
  small.put(resp("resp_x", 100), items);
  small.put(resp("resp_y", 100), items);
  small.put(resp("resp_z", 100), items);  // past 400 bytes: the oldest go
  EXPECT_FALSE(small.get("resp_x"));
  EXPECT_TRUE(small.get("resp_z"));
  EXPECT_LE(small.bytes(), 400u);
  small.put(resp("resp_big", 1000), items);  // alone past the bound: not kept
  EXPECT_FALSE(small.get("resp_big"));
  EXPECT_TRUE(small.erase("resp_z"));
  EXPECT_FALSE(small.erase("resp_z"));
  ResponseStore owned(4, 1 << 20);  // one API key's response: another key finds nothing under its id
  owned.put(resp("resp_k"), items, "alice");
  EXPECT_FALSE(owned.get("resp_k", "bob"));
  EXPECT_FALSE(owned.get("resp_k"));
  EXPECT_FALSE(owned.erase("resp_k", "bob"));
  EXPECT_TRUE(owned.get("resp_k", "alice"));
  ResponseStore off(0, 1 << 20);
  off.put(resp("resp_q"), items);
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.get("resp_q"));
}

// vLLM's --enable-force-include-usage: a stream ends with a usage chunk though the request did not ask.
TEST(ServerHttpUsage, ForceIncludeUsage) {
  for (const bool force : {false, true}) {
    server::ServerOptions o;
    o.force_include_usage = force;
    auto srv = test::stories_server(o);
    ASSERT_TRUE(srv);
    httplib::Client cli("127.0.0.1", srv->port());
    auto r = cli.Post("/v1/chat/completions",
                      json({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3}, {"stream", true}})
                          .dump(),
                      "application/json");
    ASSERT_TRUE(r);
    bool done = false;
    const auto ev = test::data_events(r->body, &done);
    ASSERT_FALSE(ev.empty());
    EXPECT_TRUE(done);
    EXPECT_EQ(ev.back().contains("usage") && ev.back()["usage"].is_object(), force) << ev.back().dump();
    srv->shutdown(5);
  }
}
