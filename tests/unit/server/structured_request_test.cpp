// Structured-output fields -> OutputConstraint: OpenAI's response_format, vLLM's structured_outputs and
// guided_*, llama-server's json_schema / grammar; conflicts and bad shapes are 400s naming the field;
// the engine's compile error (ServerContext::check) reaches the client as a 400 naming the field.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;
using Kind = OutputConstraint::Kind;

namespace {

ServerContext context() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    auto t = Tokenizer::load(test::source_path("models/stories260K/stories260K.gguf"));
    EXPECT_TRUE(t.ok()) << t.error();
    return std::shared_ptr<const Tokenizer>(*t);
  }();
  ServerContext c;
  c.served_model_name = "stories";
  c.tokenizer = tok;
  c.max_model_len = 64;
  c.n_vocab = tok->n_vocab();
  return c;
}

OutputConstraint mapped(const char* fields) {
  const json body = json::parse(std::string(R"({"prompt":"x",)") + fields + "}");
  ApiError err;
  auto m = map_completion_request(body, context(), &err);
  EXPECT_TRUE(m.ok()) << fields << ": " << err.message;
  return m.ok() ? m->prompts[0].request.constraint : OutputConstraint{};
}

ApiError refused(const char* fields, const ServerContext& ctx = context()) {
  const json body = json::parse(std::string(R"({"prompt":"x",)") + fields + "}");
  ApiError err;
  auto m = map_completion_request(body, ctx, &err);
  EXPECT_FALSE(m.ok()) << fields;
  return err;
}

}  // namespace

TEST(StructuredRequest, EverySpellingMapsToOneConstraint) {
  const std::string schema = R"({"properties":{"a":{"type":"integer"}},"type":"object"})";
  struct Case {
    std::string fields;
    Kind kind;
    std::string field;
  };
  const std::vector<Case> cases = {
      {R"("response_format":{"type":"json_object"})", Kind::JsonObject, "response_format"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":)" + schema + "}}",
       Kind::JsonSchema, "response_format"},
      {R"("response_format":{"type":"json_object","schema":)" + schema + "}", Kind::JsonSchema, "response_format"},
      {R"("structured_outputs":{"json":)" + schema + "}", Kind::JsonSchema, "structured_outputs"},
      {R"("structured_outputs":{"regex":"[0-9]+"})", Kind::Regex, "structured_outputs"},
      {R"("structured_outputs":{"choice":["a","b"]})", Kind::Choice, "structured_outputs"},
      {R"("structured_outputs":{"grammar":"root ::= \"a\""})", Kind::Grammar, "structured_outputs"},
      {R"("structured_outputs":{"json_object":true})", Kind::JsonObject, "structured_outputs"},
      {R"("guided_json":)" + schema, Kind::JsonSchema, "guided_json"},
      {R"("guided_json":)" + json(schema).dump(), Kind::JsonSchema, "guided_json"},  // a schema in a JSON string
      {R"("guided_regex":"[0-9]+")", Kind::Regex, "guided_regex"},
      {R"("guided_choice":["a","b"])", Kind::Choice, "guided_choice"},
      {R"("guided_grammar":"root ::= \"a\"")", Kind::Grammar, "guided_grammar"},
      {R"("json_schema":)" + schema, Kind::JsonSchema, "json_schema"},
      {R"("grammar":"root ::= \"a\"")", Kind::Grammar, "grammar"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields);
    OutputConstraint k = mapped(c.fields.c_str());
    EXPECT_EQ(k.kind, c.kind);
    EXPECT_EQ(k.field, c.field);
    if (c.kind == Kind::JsonSchema) {
      EXPECT_EQ(json::parse(k.text), json::parse(schema));
    }
    if (c.kind == Kind::Regex) {
      EXPECT_EQ(k.text, "[0-9]+");
    }
    if (c.kind == Kind::Grammar) {
      EXPECT_EQ(k.text, "root ::= \"a\"");
    }
    if (c.kind == Kind::Choice) {
      EXPECT_EQ(k.choices, (std::vector<std::string>{"a", "b"}));
    }
    EXPECT_FALSE(k.flexible_whitespace);
    EXPECT_TRUE(k.after.empty());
  }
  EXPECT_EQ(mapped(R"("response_format":{"type":"text"})").kind, Kind::None);
  EXPECT_EQ(mapped(R"("temperature":0)").kind, Kind::None);
}

TEST(StructuredRequest, ChatCarriesTheConstraintToo) {
  ServerContext ctx = context();
  auto tmpl = ChatTemplate::parse("{% for m in messages %}{{ m['content'] }}{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  ctx.chat_template = std::make_shared<const ChatTemplate>(std::move(tmpl).value());
  ApiError err;
  auto m = map_chat_request(json::parse(R"({"messages":[{"role":"user","content":"hi"}],"stream":true,
      "response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string"}}}})"),
                            ctx, &err);
  ASSERT_TRUE(m.ok()) << err.message;
  EXPECT_EQ(m->prompts[0].request.constraint.kind, Kind::JsonSchema);
  EXPECT_EQ(m->prompts[0].request.constraint.text, R"({"type":"string"})");
}

TEST(StructuredRequest, ConflictsAndBadShapesAre400NamingTheField) {
  struct Case {
    const char* fields;
    const char* param;
  };
  const Case cases[] = {
      {R"("response_format":{"type":"json_object"},"guided_regex":"a")", "guided_regex"},
      {R"("guided_choice":["a"],"guided_json":{})", "guided_choice"},  // the later of the fixed order
      {R"("json_schema":{},"grammar":"root ::= \"a\"")", "grammar"},
      {R"("structured_outputs":{"regex":"a","choice":["a"]})", "structured_outputs"},
      {R"("response_format":{"type":"xml"})", "response_format"},
      {R"("response_format":"json")", "response_format"},
      {R"("response_format":{"type":"json_schema"})", "response_format"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}})", "response_format"},
      {R"("structured_outputs":[])", "structured_outputs"},
      {R"("structured_outputs":{"choice":[]})", "structured_outputs.choice"},
      {R"("structured_outputs":{"choice":[1]})", "structured_outputs.choice"},
      {R"("structured_outputs":{"regex":5})", "structured_outputs.regex"},
      {R"("structured_outputs":{"json":"{not json"})", "structured_outputs.json"},
      {R"("structured_outputs":{"structural_tag":"x"})", "structured_outputs"},
      {R"("guided_choice":"a")", "guided_choice"},
      {R"("guided_regex":"")", "guided_regex"},
      {R"("guided_json":5)", "guided_json"},
      {R"("guided_grammar":["a"])", "guided_grammar"},
      {R"("guided_whitespace_pattern":" ")", "guided_whitespace_pattern"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields);
    ApiError e = refused(c.fields);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(StructuredRequest, TheEnginesCompileErrorNamesTheField) {
  ServerContext ctx = context();
  int calls = 0;
  ctx.check = [&](const GenerateRequest& r) -> std::optional<RequestProblem> {
    ++calls;
    if (!r.constraint.active()) return std::nullopt;
    return RequestProblem{RequestProblem::Kind::Invalid, r.constraint.field,
                          "unsupported keyword 'patternProperties' at /"};
  };
  ApiError e = refused(R"("guided_json":{"patternProperties":{}})", ctx);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "guided_json");
  EXPECT_NE(e.message.find("patternProperties"), std::string::npos);
  EXPECT_EQ(calls, 1);
  ApiError err;
  EXPECT_TRUE(map_completion_request(json::parse(R"({"prompt":"x"})"), ctx, &err).ok());  // unconstrained: passes
}
