// Tiered routing rules (router.h) and the models file (models_file.h): each rule kind matches and
// does not match, rules are ordered, facts are computed lazily, and bad configurations are refused
// with the file, line and key.
#include <gtest/gtest.h>

#include "server/models_file.h"
#include "server/router.h"

using namespace tmill;
using namespace tmill::server;

namespace {

bool known(const std::string& m) { return m == "small" || m == "big" || m == "mid"; }

RouterSpec spec_with(std::vector<RouteRule> rules) {
  RouterSpec s;
  s.name = "auto";
  s.default_chain = {"small"};
  s.rules = std::move(rules);
  RouteClassifier c;
  c.model = "small";
  c.question = "Hard or easy?";
  c.choices = {"easy", "hard"};
  s.classifier = c;
  EXPECT_TRUE(prepare_router(s, known).ok());
  return s;
}

RouteRule rule(const std::string& name, std::vector<std::string> chain) {
  RouteRule r;
  r.name = name;
  r.chain = std::move(chain);
  return r;
}

}  // namespace

TEST(Router, EachRuleKind) {
  auto longr = rule("long", {"big", "small"});
  longr.min_prompt_tokens = 100;
  auto tools = rule("tools", {"big"});
  tools.has_tools = true;
  auto schema = rule("schema", {"mid"});
  schema.has_json_schema = true;
  auto code = rule("code", {"big"});
  code.last_user_regex = "\\bcode\\b";
  auto header = rule("header", {"big"});
  header.header_name = "X-Tier";
  header.header_equals = "premium";
  auto meta = rule("meta", {"mid"});
  meta.metadata_key = "tier";
  meta.metadata_equals = "gold";
  auto hard = rule("hard", {"big"});
  hard.classifier_equals = "hard";
  const RouterSpec s = spec_with({longr, tools, schema, code, header, meta, hard});

  RouteInput in;
  int classified = 0;
  in.classify = [&]() -> Result<std::string> {
    ++classified;
    return std::string("easy");
  };
  EXPECT_EQ(route(s, in).rule, "default");
  EXPECT_EQ(route(s, in).chain, std::vector<std::string>{"small"});
  EXPECT_EQ(classified, 2);  // asked only when the rules before it did not match

  RouteInput l = in;
  l.prompt_tokens = [] { return int64_t{150}; };
  auto d = route(s, l);
  EXPECT_EQ(d.rule, "long");
  EXPECT_EQ(d.chain, (std::vector<std::string>{"big", "small"}));
  l.prompt_tokens = [] { return int64_t{99}; };
  EXPECT_EQ(route(s, l).rule, "default");

  RouteInput t = in;
  t.has_tools = true;
  EXPECT_EQ(route(s, t).rule, "tools");
  RouteInput j = in;
  j.has_json_schema = true;
  EXPECT_EQ(route(s, j).rule, "schema");
  RouteInput c = in;
  c.last_user_message = "please write code for me";
  EXPECT_EQ(route(s, c).rule, "code");
  c.last_user_message = "encode this";  // \b: not the word
  EXPECT_EQ(route(s, c).rule, "default");
  RouteInput h = in;
  h.header = [](const std::string& n) -> std::optional<std::string> {
    return n == "X-Tier" ? std::optional<std::string>("premium") : std::nullopt;
  };
  EXPECT_EQ(route(s, h).rule, "header");
  RouteInput m = in;
  m.metadata = [](const std::string& k) -> std::optional<std::string> {
    return k == "tier" ? std::optional<std::string>("gold") : std::nullopt;
  };
  EXPECT_EQ(route(s, m).rule, "meta");
  m.metadata = [](const std::string&) -> std::optional<std::string> { return std::string("silver"); };
  EXPECT_EQ(route(s, m).rule, "default");
  RouteInput k = in;
  k.classify = []() -> Result<std::string> { return std::string("hard"); };
  EXPECT_EQ(route(s, k).rule, "hard");
  k.classify = []() -> Result<std::string> { return Error{"queue full"}; };
  d = route(s, k);
  EXPECT_EQ(d.rule, "default");
  ASSERT_TRUE(d.classifier_error);
}

TEST(Router, FirstMatchWinsAndConditionsCombine) {
  auto both = rule("both", {"big"});
  both.has_tools = true;
  both.min_prompt_tokens = 10;
  auto tools = rule("tools", {"mid"});
  tools.has_tools = true;
  const RouterSpec s = spec_with({both, tools});
  RouteInput in;
  in.has_tools = true;
  int counted = 0;
  in.prompt_tokens = [&] {
    ++counted;
    return int64_t{5};
  };
  EXPECT_EQ(route(s, in).rule, "tools");  // "both" needs 10 tokens
  EXPECT_EQ(counted, 1);
  in.prompt_tokens = [] { return int64_t{50}; };
  EXPECT_EQ(route(s, in).rule, "both");
}

TEST(Router, PrepareRefusesBadConfigurations) {
  RouterSpec s;
  s.name = "auto";
  EXPECT_NE(prepare_router(s, known).error().find("'default'"), std::string::npos);
  s.default_chain = {"nope"};
  EXPECT_NE(prepare_router(s, known).error().find("unknown model 'nope'"), std::string::npos);
  s.default_chain = {"small"};
  auto bad = rule("bad", {"big"});
  bad.last_user_regex = "(unclosed";
  s.rules = {bad};
  EXPECT_NE(prepare_router(s, known).error().find("does not compile"), std::string::npos);
  auto cl = rule("cl", {"big"});
  cl.classifier_equals = "hard";
  s.rules = {cl};
  EXPECT_NE(prepare_router(s, known).error().find("no 'classifier'"), std::string::npos);
  s.rules = {rule("", {"big"})};
  ASSERT_TRUE(prepare_router(s, known).ok());
  EXPECT_EQ(s.rules[0].name, "rule1");
  EXPECT_EQ(s.tokenizer_model, "small");
}

TEST(ModelsFile, ParsesModelsAndRouters) {
  const char* text = R"(
memory_limit: 2GiB
models:
  - name: small
    file: s.gguf
    aliases: [fast, tiny]
    threads: 2
    kv_cache_memory: 256MiB
    kv_cache_dtype: int8
    max_model_len: 2048
    max_num_seqs: 8
    pooling: rank
  - file: /abs/big.gguf
    residency: on_demand
    idle_unload: 5m
    chat_template: "{{ messages }}"
routers:
  - name: auto
    default: small
    load_timeout: 10s
    rules:
      - {name: long, min_prompt_tokens: 1000, model: [big, small]}
      - {header: {name: X-Tier, equals: premium}, model: big}
)";
  auto f = parse_models_file(text, "models.yaml", "/etc/tm");
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(*f->memory_limit, "2GiB");
  ASSERT_EQ(f->models.size(), 2u);
  const auto& s = f->models[0];
  EXPECT_EQ(s.spec.name, "small");
  EXPECT_EQ(s.spec.path, "/etc/tm/s.gguf");
  EXPECT_EQ(s.spec.aliases, (std::vector<std::string>{"fast", "tiny"}));
  EXPECT_TRUE(s.spec.pinned);
  EXPECT_EQ(*s.engine.threads, 2);
  EXPECT_EQ(*s.engine.kv_cache_memory, "256MiB");
  EXPECT_EQ(*s.engine.kv_cache_dtype, "int8");
  EXPECT_EQ(*s.engine.max_model_len, 2048);
  EXPECT_EQ(*s.engine.max_num_seqs, 8);
  EXPECT_EQ(*s.engine.pooling, "rank");
  const auto& b = f->models[1];
  EXPECT_FALSE(b.engine.pooling);
  EXPECT_EQ(b.spec.name, "big");  // the file name without .gguf
  EXPECT_EQ(b.spec.path, "/abs/big.gguf");
  EXPECT_FALSE(b.spec.pinned);
  EXPECT_DOUBLE_EQ(b.spec.idle_unload_s, 300);
  EXPECT_EQ(b.spec.chat_template, "{{ messages }}");
  ASSERT_EQ(f->routers.size(), 1u);
  const auto& r = f->routers[0];
  EXPECT_EQ(r.name, "auto");
  EXPECT_DOUBLE_EQ(r.load_timeout_s, 10);
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(*r.rules[0].min_prompt_tokens, 1000);
  EXPECT_EQ(r.rules[0].chain, (std::vector<std::string>{"big", "small"}));
  EXPECT_EQ(r.rules[1].header_name, "X-Tier");
}

TEST(ModelsFile, ErrorsNameTheFileLineAndKey) {
  auto err = [](const std::string& text) {
    auto f = parse_models_file(text, "m.yaml", "");
    EXPECT_FALSE(f.ok());
    return f.ok() ? std::string() : f.error();
  };
  EXPECT_EQ(err("models:\n  - file: a.gguf\n    thread: 2\n"),
            "m.yaml:3:5: unknown key 'thread' in a model (known: name, file, aliases, threads, kv_cache_memory, "
            "kv_cache_dtype, max_model_len, max_num_seqs, chat_template, residency, idle_unload, loras, max_loras, pooling)");
  EXPECT_NE(err("models:\n  - file: a.gguf\n    residency: sometimes\n").find("m.yaml:3:16: 'residency' must be"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - name: a\n").find("m.yaml:2:5: a model needs 'file'"), std::string::npos);
  EXPECT_NE(err("models:\n  - file: a.gguf\n    pooling: max\n").find("'pooling' must be mean, cls, last or rank"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - file: a.gguf\n    threads: many\n").find("'threads' must be an integer"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - file: a.gguf\n    idle_unload: 5m\n").find("needs 'residency: on_demand'"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - {file: a.gguf}\n  - {file: b/a.gguf}\n").find("'a' is used twice"), std::string::npos);
  EXPECT_NE(err("models: [\n").find("m.yaml:"), std::string::npos);  // a YAML syntax error has a line too
  EXPECT_NE(err("models:\n  - {file: a.gguf}\nrouters:\n  - {name: a, default: a}\n").find("also a model's name"),
            std::string::npos);
  EXPECT_NE(err("modles: []\n").find("unknown key 'modles'"), std::string::npos);
  // Found reviewing the parser for fuzz_models_file: empty names and files, and durations that are not numbers of seconds.
  EXPECT_NE(err("models:\n  - {file: ''}\n").find("'file' must not be empty"), std::string::npos);
  EXPECT_NE(err("models:\n  - {file: a.gguf, name: ''}\n").find("'name' must not be empty"), std::string::npos);
  EXPECT_NE(err("models:\n  - {file: a.gguf, aliases: [b, '']}\n").find("'aliases' must not be empty"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - {file: a.gguf}\nrouters:\n  - {name: r, default: [a, '']}\n")
                .find("'default' must not be empty"),
            std::string::npos);
  // Found by fuzz_models_file in CI (stop 33): an empty list where a chain is needed parsed, and routing had no model.
  EXPECT_NE(err("models:\n  - {file: a.gguf}\nrouters:\n  - {name: r, default: []}\n")
                .find("m.yaml:4:24: 'default' must not be an empty list"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - {file: a.gguf}\nrouters:\n  - {name: r, default: a, rules: [{model: []}]}\n")
                .find("'model' must not be an empty list"),
            std::string::npos);
  EXPECT_TRUE(parse_models_file("models:\n  - {file: a.gguf, aliases: []}\n", "m.yaml", "").ok());  // no aliases is fine
  EXPECT_NE(err("models:\n  - {file: a.gguf, residency: on_demand, idle_unload: '-'}\n").find("not a duration"),
            std::string::npos);
  EXPECT_NE(err("models:\n  - {file: a.gguf, loras: [{file: l.gguf, scale: .nan}]}\n").find("'scale' must be"),
            std::string::npos);
}

TEST(Router, RegexOnALongMessageNeitherOverflowsNorHangs) {
  // std::regex recursed once per character ".*" consumed: a 2 MB message overflowed the stack.
  auto span = rule("span", {"big"});
  span.last_user_regex = "code.*review";
  auto evil = rule("evil", {"mid"});
  evil.last_user_regex = "^(a+)+$";  // catastrophic backtracking: stopped by the match limit
  RouterSpec s = spec_with({evil, span});
  RouteInput in;
  in.last_user_message = "please code " + std::string(2 << 20, 'x') + " and review";
  RouteDecision d = route(s, in);
  EXPECT_EQ(d.rule, "span");
  in.last_user_message = std::string(5000, 'a') + "b";
  d = route(s, in);
  EXPECT_EQ(d.rule, "default");
  EXPECT_EQ(d.regex_limit_rule, "evil");
  in.last_user_message = "aaaa";
  EXPECT_EQ(route(s, in).rule, "evil");
}
