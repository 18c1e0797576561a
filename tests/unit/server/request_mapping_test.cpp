// OpenAI request JSON -> engine requests (map_completion_request / map_chat_request), against the
// bundled stories260K tokenizer and hand-written chat templates.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "server_test_data.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

using test::stories_tokenizer;

std::shared_ptr<const ChatTemplate> tmpl(const std::string& src) {
  auto t = ChatTemplate::parse(src);
  EXPECT_TRUE(t.ok()) << t.error();
  return std::make_shared<const ChatTemplate>(std::move(t).value());
}

// "<role>: <content>\n" per message; "assistant:" when a generation prompt is asked for.
const char* kPlainTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

ServerContext context() {
  ServerContext c;
  c.served_model_name = "stories";
  c.tokenizer = stories_tokenizer();
  c.chat_template = tmpl(kPlainTemplate);
  c.max_model_len = 64;
  c.n_vocab = c.tokenizer->n_vocab();
  c.max_tokens_default = 20;
  c.max_n = 4;
  c.max_logprobs = 5;
  c.queue_timeout_s = 7;
  return c;
}

json J(const char* s) { return json::parse(s); }

MappedRequest completion_ok(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_completion_request(body, c, &err);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(r).value() : MappedRequest{};
}

ApiError completion_err(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_completion_request(body, c, &err);
  EXPECT_FALSE(r.ok()) << body.dump();
  if (!r.ok()) {
    EXPECT_EQ(r.error(), err.message);
  }
  return err;
}

MappedRequest chat_ok(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_chat_request(body, c, &err);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(r).value() : MappedRequest{};
}

ApiError chat_err(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_chat_request(body, c, &err);
  EXPECT_FALSE(r.ok()) << body.dump();
  return err;
}

}  // namespace

TEST(CompletionMapping, StringPromptTokenizedLikeGenerate) {
  const ServerContext c = context();
  MappedRequest m = completion_ok(J(R"({"model":"stories","prompt":"Once upon a time"})"));
  ASSERT_EQ(m.prompts.size(), 1u);
  const GenerateRequest& r = m.prompts[0].request;
  EXPECT_EQ(r.prompt, c.tokenizer->encode("Once upon a time", true, true));
  EXPECT_EQ(r.prompt.front(), c.tokenizer->bos_id());  // stories260K asks for BOS
  EXPECT_EQ(m.prompts[0].text, "Once upon a time");
  // OpenAI's defaults for /v1/completions.
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.logprobs, -1);
  EXPECT_FALSE(r.sampling.seed.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_DOUBLE_EQ(r.queue_timeout_s, 7);
  EXPECT_FALSE(m.stream);
  EXPECT_EQ(m.model, "stories");
}

TEST(CompletionMapping, EveryParameterReachesTheEngineRequest) {
  MappedRequest m = completion_ok(J(R"({
    "prompt": "Hi", "max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "n": 2, "stop": ["end", "."], "seed": 42, "presence_penalty": 0.5, "frequency_penalty": -0.5,
    "repetition_penalty": 1.1, "logit_bias": {"5": -100, "17": 2.5}, "logprobs": 3, "ignore_eos": true,
    "user": "u1", "min_tokens": 2, "skip_special_tokens": false, "include_stop_str_in_output": true,
    "stop_token_ids": [7, 8], "stream": true, "stream_options": {"include_usage": true},
    "some_unknown_field": {"ignored": [1, 2]}})"));
  const GenerateRequest& r = m.prompts[0].request;
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(m.n, 2);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"end", "."}));
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0], (std::pair<int32_t, float>{5, -100.0f}));
  EXPECT_EQ(r.sampling.logit_bias[1], (std::pair<int32_t, float>{17, 2.5f}));
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_TRUE(m.logprobs);
  EXPECT_EQ(m.top_logprobs, 3);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.min_tokens, 2);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(m.stream);
  EXPECT_TRUE(m.include_usage);
  EXPECT_FALSE(m.echo);
}

TEST(CompletionMapping, PromptShapes) {
  const ServerContext c = context();
  MappedRequest ids = completion_ok(J(R"({"prompt": [1, 400, 30]})"));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].request.prompt, (std::vector<int32_t>{1, 400, 30}));
  EXPECT_EQ(ids.prompts[0].text, c.tokenizer->decode(std::vector<int32_t>{1, 400, 30}));

  MappedRequest arrays = completion_ok(J(R"({"prompt": [[1, 2], [1, 3, 4]]})"));
  ASSERT_EQ(arrays.prompts.size(), 2u);
  EXPECT_EQ(arrays.prompts[1].request.prompt, (std::vector<int32_t>{1, 3, 4}));

  MappedRequest strings = completion_ok(J(R"({"prompt": ["a cat", "a dog"], "seed": 5})"));
  ASSERT_EQ(strings.prompts.size(), 2u);
  EXPECT_EQ(strings.prompts[1].request.prompt, c.tokenizer->encode("a dog", true, true));
  EXPECT_EQ(strings.prompts[1].request.sampling.seed, 5u);

  // An empty string is BOS alone, as `tokenmill generate` does.
  MappedRequest empty = completion_ok(J(R"({"prompt": ""})"));
  EXPECT_EQ(empty.prompts[0].request.prompt, (std::vector<int32_t>{c.tokenizer->bos_id()}));
}

TEST(CompletionMapping, NullMeansAbsentAndIntegralFloatsAreIntegers) {
  MappedRequest m = completion_ok(J(R"({"prompt":"x","max_tokens":null,"temperature":null,"stop":null,"n":2.0})"));
  EXPECT_EQ(m.prompts[0].request.max_tokens, 16);
  EXPECT_EQ(m.n, 2);
  EXPECT_TRUE(m.prompts[0].request.stop.empty());
  MappedRequest s = completion_ok(J(R"({"prompt":"x","stop":"the"})"));
  EXPECT_EQ(s.prompts[0].request.stop, std::vector<std::string>{"the"});
  MappedRequest topk = completion_ok(J(R"({"prompt":"x","top_k":-1})"));
  EXPECT_EQ(topk.prompts[0].request.sampling.top_k, 0);
  MappedRequest negseed = completion_ok(J(R"({"prompt":"x","seed":-1})"));
  EXPECT_EQ(negseed.prompts[0].request.sampling.seed, static_cast<uint64_t>(-1));
}

TEST(CompletionMapping, WrongTypesAndRangesAre400WithTheParam) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt":"x","max_tokens":"5"})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":-3})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1e300})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":2.5})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":99999999999999999999999})", "max_tokens"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","temperature":-1})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","top_k":-2})", "top_k"},
      {R"({"prompt":"x","min_p":2})", "min_p"},
      {R"({"prompt":"x","n":0})", "n"},
      {R"({"prompt":"x","n":5})", "n"},
      {R"({"prompt":"x","n":true})", "n"},
      {R"({"prompt":"x","stop":5})", "stop"},
      {R"({"prompt":"x","stop":["a",1]})", "stop"},
      {R"({"prompt":"x","seed":"1"})", "seed"},
      {R"({"prompt":"x","presence_penalty":3})", "presence_penalty"},
      {R"({"prompt":"x","frequency_penalty":-2.5})", "frequency_penalty"},
      {R"({"prompt":"x","repetition_penalty":0})", "repetition_penalty"},
      {R"({"prompt":"x","logit_bias":[1,2]})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"abc":1}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"100000":1}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"5":101}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"5":"1"}})", "logit_bias"},
      {R"({"prompt":"x","logprobs":6})", "logprobs"},
      {R"({"prompt":"x","logprobs":true})", "logprobs"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options"},
      {R"({"prompt":"x","stream":true,"stream_options":[]})", "stream_options"},
      {R"({"prompt":"x","echo":1})", "echo"},
      {R"({"prompt":"x","ignore_eos":"no"})", "ignore_eos"},
      {R"({"prompt":"x","min_tokens":-1})", "min_tokens"},
      {R"({"prompt":"x","min_tokens":17})", "min_tokens"},
      {R"({"prompt":"x","user":5})", "user"},
      {R"({"prompt":"x","priority":3})", "priority"},
      {R"({"prompt":"x","stop_token_ids":[100000]})", "stop_token_ids"},
      {R"({"prompt":"x","suffix":"tail"})", "suffix"},  // stories260K has no fill-in-the-middle tokens
      {R"({"prompt":"x","best_of":3})", "best_of"},
      {R"({"prompt":"x","response_format":{"type":"xml"}})", "response_format"},
      {R"({"prompt":"x","echo":true,"logprobs":1})", "logprobs"},
      {R"({"prompt":"x","truncate_prompt_tokens":0})", "truncate_prompt_tokens"},
      {R"({"prompt":"x","truncate_prompt_tokens":65})", "truncate_prompt_tokens"},
      {R"({})", "prompt"},
      {R"({"prompt":null})", "prompt"},
      {R"({"prompt":5})", "prompt"},
      {R"({"prompt":[]})", "prompt"},
      // (["a",[1]] and [1,"a"] are llama-server's list of prompts and mixed prompt: accepted)
      {R"({"prompt":["a",true]})", "prompt"},
      {R"({"prompt":[1,null]})", "prompt"},
      {R"({"prompt":[1,"a",[2]]})", "prompt"},
      {R"({"prompt":[[1],[]]})", "prompt"},
      {R"({"prompt":[[]]})", "prompt"},
      {R"({"prompt":[-1]})", "prompt"},
      {R"({"prompt":[512]})", "prompt"},
      {R"({"prompt":{"text":"x"}})", "prompt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    ApiError e = completion_err(J(c.body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(CompletionMapping, UnknownModelIs404) {
  ApiError e = completion_err(J(R"({"model":"gpt-4","prompt":"x"})"));
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(e.message, "The model `gpt-4` does not exist.");
}

TEST(CompletionMapping, ContextLimitsNameBothNumbers) {
  // 40 prompt tokens + 30 > 64.
  json body = {{"prompt", std::vector<int>(40, 5)}, {"max_tokens", 30}};
  ApiError e = completion_err(body);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_NE(e.message.find("maximum context length is 64 tokens"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("you requested 70 tokens (40 in the prompt, 30 in the completion)"), std::string::npos)
      << e.message;
  // Exactly filling the context is fine.
  body["max_tokens"] = 24;
  EXPECT_EQ(completion_ok(body).prompts[0].request.max_tokens, 24);
  // The prompt alone too long.
  ApiError long_prompt = completion_err(json{{"prompt", std::vector<int>(64, 5)}});
  EXPECT_EQ(long_prompt.code, "context_length_exceeded");
  EXPECT_NE(long_prompt.message.find("64 input tokens"), std::string::npos) << long_prompt.message;
  // Default max_tokens never exceeds the room left.
  EXPECT_EQ(completion_ok(json{{"prompt", std::vector<int>(60, 5)}}).prompts[0].request.max_tokens, 4);
}

TEST(CompletionMapping, TruncatePromptTokensKeepsTheLastTokens) {
  std::vector<int> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(10 + i);
  // 100 tokens do not fit a context of 64, the last 10 do.
  MappedRequest m = completion_ok(json{{"prompt", ids}, {"truncate_prompt_tokens", 10}, {"max_tokens", 5}});
  EXPECT_EQ(m.prompts[0].request.prompt, std::vector<int32_t>(ids.begin() + 90, ids.end()));
  EXPECT_TRUE(m.prompts[0].truncated);
  EXPECT_EQ(m.prompts[0].original_tokens, 100);
  // -1: the context length (64) - then there is no room left for a completion.
  EXPECT_EQ(completion_err(json{{"prompt", ids}, {"truncate_prompt_tokens", -1}}).code, "context_length_exceeded");
  // A long text prompt made to fit.
  std::string text;
  for (int i = 0; i < 200; ++i) text += "cat ";
  MappedRequest t = completion_ok(json{{"prompt", text}, {"truncate_prompt_tokens", 30}, {"max_tokens", 10}});
  EXPECT_EQ(t.prompts[0].request.prompt.size(), 30u);
  EXPECT_TRUE(t.prompts[0].truncated);
  // Shorter than N: untouched.
  MappedRequest s = completion_ok(json{{"prompt", "cat"}, {"truncate_prompt_tokens", 30}});
  EXPECT_FALSE(s.prompts[0].truncated);
}

TEST(ChatMapping, RendersTheTemplateAndAddsBosOnce) {
  const ServerContext c = context();
  const json body = J(R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]})");
  ApiError err;
  auto text = render_chat_prompt(body, c, &err);
  ASSERT_TRUE(text.ok()) << text.error();
  EXPECT_EQ(*text, "system: Be brief.\nuser: Hi\nassistant:");
  auto m = map_chat_request(body, c, &err);
  ASSERT_TRUE(m.ok()) << m.error();
  std::vector<int32_t> expected = c.tokenizer->encode(*text, false, true);
  expected.insert(expected.begin(), c.tokenizer->bos_id());
  EXPECT_EQ(m->prompts[0].request.prompt, expected);
  // Chat without max_tokens: the rest of the context, capped by max_tokens_default (20).
  EXPECT_EQ(m->prompts[0].request.max_tokens, std::min<int32_t>(20, 64 - static_cast<int32_t>(expected.size())));

  // A template that writes BOS itself: not doubled.
  ServerContext c2 = context();
  c2.chat_template = tmpl(std::string("{{ bos_token }}") + kPlainTemplate);
  auto m2 = map_chat_request(body, c2, &err);
  ASSERT_TRUE(m2.ok()) << m2.error();
  EXPECT_EQ(m2->prompts[0].request.prompt, expected);
  EXPECT_NE(m2->prompts[0].request.prompt[1], c.tokenizer->bos_id());
}

TEST(ChatMapping, ParametersAndContentParts) {
  ApiError err;
  auto m = map_chat_request(J(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b"}]}], "max_completion_tokens": 7, "max_tokens": 3, "logprobs": true,
      "top_logprobs": 2, "add_generation_prompt": false})"),
                            context(), &err);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->prompts[0].text, "user: a\nb\n");
  EXPECT_EQ(m->prompts[0].request.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_TRUE(m->logprobs);
  EXPECT_EQ(m->top_logprobs, 2);
  EXPECT_EQ(m->prompts[0].request.sampling.logprobs, 2);
  EXPECT_EQ(m->kind, ApiKind::Chat);

  auto cont = map_chat_request(J(R"({"messages":[{"role":"user","content":"Hi"},
      {"role":"assistant","content":"Once"}], "continue_final_message": true, "add_generation_prompt": false})"),
                               context(), &err);
  ASSERT_TRUE(cont.ok()) << cont.error();
  EXPECT_EQ(cont->prompts[0].text, "user: Hi\nassistant: Once");
}

TEST(ChatMapping, Errors) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[5]})", "messages"},
      {R"({"messages":[{"content":"x"}]})", "messages"},
      {R"({"messages":[{"role":5,"content":"x"}]})", "messages"},
      {R"({"messages":[{"role":"user"}]})", "messages"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", "logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})", "max_completion_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":{}})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"chat_template":"{% if %}"})", "chat_template"},
      {R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]})", "chat_template_kwargs"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":60})", "max_tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    ApiError e = chat_err(J(c.body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
  }
  // A template that raises: the message reaches the client as a 400.
  ServerContext c = context();
  c.chat_template = tmpl("{{ raise_exception('roles must alternate') }}");
  ApiError e = chat_err(J(R"({"messages":[{"role":"user","content":"x"}]})"), c);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("roles must alternate"), std::string::npos) << e.message;
}

TEST(ParseBody, RejectsBadJsonUtf8DepthAndNonObjects) {
  auto status_of = [](std::string_view body) -> std::string {
    try {
      parse_body(body);
      return "ok";
    } catch (const RequestError& e) {
      EXPECT_EQ(e.error.status, 400);
      return e.error.message;
    }
  };
  EXPECT_EQ(status_of(R"({"a":1})"), "ok");
  EXPECT_NE(status_of("{\"a\":").find("Invalid JSON"), std::string::npos);
  EXPECT_NE(status_of("").find("Invalid JSON"), std::string::npos);
  EXPECT_NE(status_of("{\"a\":\"\xff\xfe\"}").find("UTF-8"), std::string::npos);
  EXPECT_NE(status_of(R"({"a":"\ud800"})").find("UTF-8"), std::string::npos);
  EXPECT_NE(status_of("[1,2]").find("JSON object"), std::string::npos);
  EXPECT_NE(status_of("\"str\"").find("JSON object"), std::string::npos);
  std::string deep(100, '[');
  deep = "{\"a\":" + deep + std::string(100, ']') + "}";
  EXPECT_NE(status_of(deep).find("nesting"), std::string::npos);
}

// truncation "auto": the oldest whole turns go (never the system prompt nor the latest turn), the
// fewest that make the prompt and max_tokens fit; what went is reported; "disabled" keeps the 400.
TEST(ChatMapping, TruncationAutoDropsTheOldestWholeTurns) {
  ServerContext c = context();
  c.max_model_len = 200;  // the conversation is ~360 tokens, a turn ~54
  json msgs = json::array();
  msgs.push_back({{"role", "system"}, {"content", "Be brief."}});
  for (int t = 0; t < 6; ++t) {
    msgs.push_back({{"role", "user"}, {"content", fmt::format("Tell me about the cat number {} please.", t)}});
    msgs.push_back({{"role", "assistant"}, {"content", fmt::format("The cat number {} sat on a mat.", t)}});
  }
  msgs.push_back({{"role", "user"}, {"content", "And the dog?"}});
  json body = {{"messages", msgs}, {"max_tokens", 16}};
  // Too long without truncation.
  ApiError e = chat_err(body, c);
  EXPECT_EQ(e.code, "context_length_exceeded");
  body["truncation"] = "disabled";
  EXPECT_EQ(chat_err(body, c).code, "context_length_exceeded");

  body["truncation"] = "auto";
  MappedRequest m = chat_ok(body, c);
  const MappedPrompt& p = m.prompts[0];
  EXPECT_LE(static_cast<int64_t>(p.request.prompt.size()) + 16, c.max_model_len);
  EXPECT_GT(p.dropped_messages, 0);
  EXPECT_EQ(p.dropped_messages % 2, 0) << "whole turns: a user message and its answer";
  EXPECT_GT(p.dropped_tokens, 0);
  EXPECT_EQ(p.text.rfind("system: Be brief.\n", 0), 0u) << p.text;  // the system prompt stays first
  EXPECT_NE(p.text.find("user: And the dog?\nassistant:"), std::string::npos) << p.text;
  // The fewest turns: keeping one more turn would not fit, and the oldest kept turn is the next one.
  const int dropped_turns = p.dropped_messages / 2;
  EXPECT_NE(p.text.find(fmt::format("cat number {} please", dropped_turns)), std::string::npos) << p.text;
  EXPECT_EQ(p.text.find(fmt::format("cat number {} please", dropped_turns - 1)), std::string::npos) << p.text;
  json fewer = msgs;
  fewer.erase(fewer.begin() + 1, fewer.begin() + 1 + 2 * (dropped_turns - 1));
  json longer = {{"messages", fewer}, {"max_tokens", 16}};
  EXPECT_EQ(chat_err(longer, c).code, "context_length_exceeded");

  // The server's default applies when the request says nothing; the request's own value wins.
  ServerContext server_auto = c;
  server_auto.truncation_auto = true;
  json plain = {{"messages", msgs}, {"max_tokens", 16}};
  EXPECT_GT(chat_ok(plain, server_auto).prompts[0].dropped_messages, 0);
  plain["truncation"] = "disabled";
  EXPECT_EQ(chat_err(plain, server_auto).code, "context_length_exceeded");

  // The latest turn alone too long: the usual 400, nothing silently cut.
  json huge = json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "hello"}},
                           {{"role", "user"}, {"content", std::string(400, 'a')}}});
  EXPECT_EQ(chat_err(json{{"messages", huge}, {"truncation", "auto"}}, c).code, "context_length_exceeded");
  // A prompt that fits is left alone.
  json small = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"truncation", "auto"}};
  EXPECT_EQ(chat_ok(small, c).prompts[0].dropped_messages, 0);
  // Bad values are a 400 naming the field.
  ApiError bad = chat_err(json{{"messages", msgs}, {"truncation", "middle"}}, c);
  EXPECT_EQ(bad.param, "truncation");
}

// "timeout": the whole request's deadline, capped by (and defaulting to) --max-request-time.
TEST(CompletionMapping, TimeoutIsCappedByTheServerMaximum) {
  ServerContext c = context();
  EXPECT_EQ(completion_ok(json{{"prompt", "a"}}, c).deadline_s, 0.0);  // no limit anywhere
  EXPECT_EQ(completion_ok(json{{"prompt", "a"}, {"timeout", 2.5}}, c).deadline_s, 2.5);
  c.max_request_time_s = 10;
  EXPECT_EQ(completion_ok(json{{"prompt", "a"}}, c).deadline_s, 10.0);
  EXPECT_EQ(completion_ok(json{{"prompt", "a"}, {"timeout", 3}}, c).deadline_s, 3.0);
  EXPECT_EQ(completion_ok(json{{"prompt", "a"}, {"timeout", 300}}, c).deadline_s, 10.0);
  EXPECT_EQ(completion_err(json{{"prompt", "a"}, {"timeout", 0}}, c).param, "timeout");
  EXPECT_EQ(completion_err(json{{"prompt", "a"}, {"timeout", "soon"}}, c).param, "timeout");
}
