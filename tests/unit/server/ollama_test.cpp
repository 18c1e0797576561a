// Ollama's API (ollama.h): the request translated to a chat (or llama-server /completion) body, the
// stream translator's NDJSON; and over loopback on stories260K (routes_ollama.cpp): /api/chat and
// /api/generate against the chat and completions routes' greedy text, streamed and not, the load
// request, /api/tags, /api/ps, /api/show, /api/version, and the errors.
#include <gtest/gtest.h>

#include <httplib.h>

#include <sstream>

#include "server/ollama.h"
#include "server/server.h"
#include "server_http_client.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::server;

namespace {

json translate(OllamaKind kind, const json& body, bool* completions) { return ollama_to_openai(kind, body, completions); }

ApiError translate_err(OllamaKind kind, const json& body) {
  bool c = false;
  return test::request_error([&] { ollama_to_openai(kind, body, &c); }, body.dump());
}

std::vector<json> ndjson(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST(Ollama, ChatAndGenerateBecomeOpenAiBodies) {
  bool completions = true;
  const json c = translate(OllamaKind::Chat,
                           {{"model", "qwen3:latest"},
                            {"messages",
                             {{{"role", "system"}, {"content", "Be brief."}},
                              {{"role", "user"}, {"content", "Weather?"}},
                              {{"role", "assistant"},
                               {"content", ""},
                               {"thinking", "use the tool"},
                               {"tool_calls", {{{"function", {{"name", "w"}, {"arguments", {{"city", "Paris"}}}}}}}}},
                              {{"role", "tool"}, {"content", "Sunny"}, {"tool_name", "w"}}}},
                            {"tools", {{{"type", "function"}, {"function", {{"name", "w"}}}}}},
                            {"format", "json"},
                            {"options", {{"temperature", 0.2}, {"num_predict", 30}, {"repeat_penalty", 1.1},
                                         {"stop", {"END"}}, {"num_ctx", 8192}, {"seed", 7}}},
                            {"think", false},
                            {"keep_alive", "5m"},
                            {"stream", false}},
                           &completions);
  EXPECT_FALSE(completions);
  EXPECT_EQ(c["model"], "qwen3");  // Ollama's default tag dropped
  EXPECT_EQ(c["keep_alive"], "5m");
  ASSERT_EQ(c["messages"].size(), 4u);
  EXPECT_EQ(c["messages"][2]["reasoning_content"], "use the tool");
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["function"]["name"], "w");
  EXPECT_EQ(json::parse(c["messages"][2]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(c["messages"][3]["name"], "w");
  EXPECT_EQ(c["tools"][0]["function"]["name"], "w");
  EXPECT_EQ(c["response_format"], json({{"type", "json_object"}}));
  EXPECT_EQ(c["temperature"], 0.2);
  EXPECT_EQ(c["max_tokens"], 30);
  EXPECT_EQ(c["repetition_penalty"], 1.1);
  EXPECT_EQ(c["stop"], json({"END"}));
  EXPECT_EQ(c["seed"], 7);
  EXPECT_FALSE(c.contains("num_ctx"));
  EXPECT_EQ(c["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(c["stream"], true);  // always, internally
  EXPECT_EQ(c["stream_options"]["continuous_usage_stats"], true);
  // generate: the template applies (system + user), or raw / suffix: llama-server's /completion
  const json g = translate(OllamaKind::Generate, {{"prompt", "Hi"}, {"system", "S"}, {"format", {{"type", "object"}}}},
                           &completions);
  EXPECT_FALSE(completions);
  EXPECT_EQ(g["messages"], json::array({{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "Hi"}}}));
  EXPECT_EQ(g["response_format"]["json_schema"]["schema"], json({{"type", "object"}}));
  const json raw = translate(OllamaKind::Generate,
                             {{"prompt", "def f("}, {"raw", true}, {"options", {{"num_predict", 9}, {"repeat_penalty", 1.2}}}},
                             &completions);
  EXPECT_TRUE(completions);
  EXPECT_EQ(raw["prompt"], "def f(");
  EXPECT_EQ(raw["n_predict"], 9);
  EXPECT_EQ(raw["repeat_penalty"], 1.2);
  const json fim = translate(OllamaKind::Generate, {{"prompt", "def f("}, {"suffix", ")"}}, &completions);
  EXPECT_TRUE(completions);
  EXPECT_EQ(fim["suffix"], ")");
  // num_predict -1 / -2: the rest of the context; repeat_last_n 0: no penalties
  EXPECT_FALSE(translate(OllamaKind::Chat, {{"messages", json::array()}, {"options", {{"num_predict", -1}}}}, &completions)
                   .contains("max_tokens"));
  EXPECT_FALSE(translate(OllamaKind::Chat,
                         {{"messages", json::array()}, {"options", {{"repeat_penalty", 1.3}, {"repeat_last_n", 0}}}},
                         &completions)
                   .contains("repetition_penalty"));
  // load-only requests
  EXPECT_TRUE(ollama_load_only(OllamaKind::Chat, {{"model", "m"}}));
  EXPECT_TRUE(ollama_load_only(OllamaKind::Chat, {{"model", "m"}, {"messages", json::array()}}));
  EXPECT_TRUE(ollama_load_only(OllamaKind::Generate, {{"model", "m"}, {"prompt", ""}}));
  EXPECT_FALSE(ollama_load_only(OllamaKind::Generate, {{"model", "m"}, {"prompt", "x"}}));
  EXPECT_EQ(ollama_model_name("a:latest"), "a");
  EXPECT_EQ(ollama_model_name("a:7b"), "a:7b");
}

TEST(Ollama, UntranslatableRequestsAre400NamingTheField) {
  const std::vector<std::tuple<OllamaKind, json, std::string>> cases = {
      {OllamaKind::Chat, json::array(), ""},
      {OllamaKind::Chat, {{"messages", "x"}}, "messages"},
      {OllamaKind::Chat, {{"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"AAAA"}}}}}}, "messages"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"stream", "yes"}}, "stream"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"format", "xml"}}, "format"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"think", 3}}, "think"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"options", 5}}, "options"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"options", {{"mirostat", 2}}}}, "options"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"options", {{"typical_p", 0.5}}}}, "options"},
      {OllamaKind::Chat, {{"messages", json::array()}, {"options", {{"num_predict", 0}}}}, "options"},
      {OllamaKind::Generate, {{"prompt", 5}}, "prompt"},
      {OllamaKind::Generate, {{"prompt", "x"}, {"images", {"AAAA"}}}, "images"},
      {OllamaKind::Generate, {{"prompt", "x"}, {"template", "{{ .Prompt }}"}}, "template"},
      {OllamaKind::Generate, {{"prompt", "x"}, {"context", {1, 2}}}, "context"},
  };
  for (const auto& [kind, body, param] : cases) {
    const ApiError e = translate_err(kind, body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump();
  }
}

TEST(Ollama, StreamTranslatorWritesNdjsonAndTheLastLinesCounts) {
  using std::chrono::milliseconds;
  const auto t0 = std::chrono::steady_clock::now();
  auto chunk = [](json delta, json finish = nullptr) {
    return json{{"model", "m"},
                {"choices", {{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish}}}},
                {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 3}}}};
  };
  OllamaStream s(OllamaKind::Chat, /*stream=*/true, "asked", t0);
  std::string out;
  out += s.chunk(chunk({{"role", "assistant"}, {"content", ""}}), t0 + milliseconds(1));
  out += s.chunk(chunk({{"reasoning_content", "hm"}}), t0 + milliseconds(10));
  out += s.chunk(chunk({{"content", "Hi"}}), t0 + milliseconds(20));
  out += s.chunk(chunk({{"tool_calls", {{{"index", 0}, {"id", "c"}, {"function", {{"name", "w"}, {"arguments", "{\"a\""}}}}}}}),
                 t0 + milliseconds(30));
  out += s.chunk(chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", ":1}"}}}}}}}), t0 + milliseconds(40));
  out += s.chunk(chunk(json::object(), "tool_calls"), t0 + milliseconds(50));
  EXPECT_TRUE(s.finished());
  const auto lines = ndjson(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0]["message"]["thinking"], "hm");
  EXPECT_EQ(lines[0]["done"], false);
  EXPECT_EQ(lines[1]["message"]["content"], "Hi");
  EXPECT_EQ(lines[1]["model"], "m");  // the model that answered
  const json& last = lines[2];
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["done_reason"], "stop");
  EXPECT_EQ(last["message"]["content"], "");
  EXPECT_EQ(last["message"]["tool_calls"][0]["function"]["name"], "w");
  EXPECT_EQ(last["message"]["tool_calls"][0]["function"]["arguments"], json({{"a", 1}}));
  EXPECT_EQ(last["prompt_eval_count"], 12);
  EXPECT_EQ(last["eval_count"], 3);
  EXPECT_EQ(last["total_duration"], 50000000);
  EXPECT_EQ(last["prompt_eval_duration"], 10000000);  // to the first output
  EXPECT_EQ(last["eval_duration"], 40000000);
  // not streaming: one object with the whole text; llama-server's events (raw /api/generate) too
  OllamaStream g(OllamaKind::Generate, /*stream=*/false, "m", t0);
  EXPECT_EQ(g.chunk({{"content", "de"}, {"stop", false}, {"tokens_predicted", 1}, {"tokens_evaluated", 4}}, t0), "");
  EXPECT_EQ(g.chunk({{"content", "f"}, {"stop", false}, {"tokens_predicted", 2}, {"tokens_evaluated", 4}}, t0), "");
  const auto one = ndjson(g.chunk({{"content", ""}, {"stop", true}, {"stop_type", "limit"}, {"tokens_predicted", 2},
                                   {"tokens_evaluated", 4}, {"model", "m2"}},
                                  t0));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["response"], "def");
  EXPECT_EQ(one[0]["done_reason"], "length");
  EXPECT_EQ(one[0]["model"], "m2");
  EXPECT_EQ(one[0]["eval_count"], 2);
  EXPECT_EQ(one[0]["prompt_eval_count"], 4);
  // errors; the time format
  OllamaStream e(OllamaKind::Chat, true, "m", t0);
  EXPECT_EQ(ndjson(e.error({{"error", {{"message", "late"}}}}))[0], json({{"error", "late"}}));
  EXPECT_EQ(ollama_time(std::chrono::system_clock::from_time_t(0) + std::chrono::nanoseconds(5)),
            "1970-01-01T00:00:00.000000005Z");
}

TEST(OllamaServer, ChatAndGenerateGiveTheRoutesText) {
  auto srv = test::stories_server();
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  int status = 0;
  const json msgs = {{{"role", "user"}, {"content", "Once upon a time"}}};
  const json chat = test::post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}},
                                    &status);
  ASSERT_EQ(status, 200);
  const std::string want = chat["choices"][0]["message"]["content"];
  // streamed (Ollama's default): NDJSON, the text in pieces, the counts on the last line
  auto r = cli.Post("/api/chat",
                    json({{"model", "stories260K:latest"}, {"messages", msgs}, {"options", {{"temperature", 0}, {"num_predict", 12}}}})
                        .dump(),
                    "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
  const auto lines = ndjson(r->body);
  ASSERT_GE(lines.size(), 2u);
  std::string text;
  for (const json& l : lines) text += l["message"]["content"].get<std::string>();
  EXPECT_EQ(text, want);
  EXPECT_EQ(lines.back()["done"], true);
  EXPECT_EQ(lines.back()["done_reason"], "length");
  EXPECT_EQ(lines.back()["eval_count"], 12);
  EXPECT_EQ(lines.back()["prompt_eval_count"], chat["usage"]["prompt_tokens"]);
  EXPECT_GT(lines.back()["total_duration"].get<int64_t>(), 0);
  // not streamed: one object
  const json whole = test::post_json(
      cli, "/api/chat", {{"messages", msgs}, {"stream", false}, {"options", {{"temperature", 0}, {"num_predict", 12}}}}, &status);
  ASSERT_EQ(status, 200) << whole.dump();
  EXPECT_EQ(whole["message"]["content"], want);
  EXPECT_EQ(whole["done"], true);
  // generate: the chat template applies; raw: the prompt as it is, as /v1/completions
  const json gen = test::post_json(
      cli, "/api/generate", {{"prompt", "Once upon a time"}, {"stream", false}, {"options", {{"temperature", 0}, {"num_predict", 12}}}},
      &status);
  ASSERT_EQ(status, 200) << gen.dump();
  EXPECT_EQ(gen["response"], want);
  const json comp = test::post_json(cli, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}},
                                    &status);
  const json raw = test::post_json(cli, "/api/generate",
                                   {{"prompt", "Once upon a time"}, {"raw", true}, {"stream", false},
                                    {"options", {{"temperature", 0}, {"num_predict", 12}}}},
                                   &status);
  ASSERT_EQ(status, 200) << raw.dump();
  EXPECT_EQ(raw["response"], comp["choices"][0]["text"]);
  EXPECT_EQ(raw["eval_count"], 12);
  // the load request, the model lists, errors
  const json load = test::post_json(cli, "/api/generate", {{"model", "stories260K"}}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(load["done_reason"], "load");
  const json tags = json::parse(cli.Get("/api/tags")->body);
  EXPECT_EQ(tags["models"][0]["name"], "stories260K");
  EXPECT_EQ(json::parse(cli.Get("/api/ps")->body)["models"].size(), 1u);
  EXPECT_EQ(json::parse(cli.Get("/api/version")->body)["version"], "test");
  const json show = test::post_json(cli, "/api/show", {{"model", "stories260K"}}, &status);
  ASSERT_EQ(status, 200) << show.dump();
  EXPECT_EQ(show["details"]["family"], "llama");
  EXPECT_EQ(show["model_info"]["llama.context_length"], 512);
  EXPECT_EQ(show["capabilities"][0], "completion");
  const json missing = test::post_json(cli, "/api/chat", {{"model", "nope"}, {"messages", msgs}}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(missing["error"].is_string()) << missing.dump();
  const json bad = test::post_json(cli, "/api/chat", {{"messages", msgs}, {"options", {{"mirostat", 1}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(bad["error"].get<std::string>().find("mirostat"), std::string::npos);
  srv->shutdown(5);
}
