// LoRA adapters served as model names (routes_lora.cpp, ModelRegistry adapters), over loopback:
// an adapter's greedy answer equals the merged model's, base and adapter requests share a batch,
// the prefix cache keeps them apart, vLLM's load/unload routes, unknown adapters 404.
#include <gtest/gtest.h>

#include <httplib.h>

#include <thread>

#include "engine/engine.h"
#include "server/models_file.h"
#include "server/server.h"
#include "test_support.h"
#include "server_test_engine.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::string stories() { return test::source_path("models/stories260K/stories260K.gguf"); }

// Adapters written once for the whole file: a, b (two seeds) and the base with a merged at scale 0.5.
struct Files {
  std::string a, b, merged;
};
const Files& files() {
  static const Files f = [] {
    const std::string dir = test::temp_dir();
    Files f{dir + "/srv-lora-a.gguf", dir + "/srv-lora-b.gguf", dir + "/srv-lora-merged.gguf"};
    const std::string bin = test::tokenmill_binary();
    const std::string dummy = " lora dummy -m " + stories() + " --targets all --rank 4 --spread 0.2 -o ";
    auto r = test::run_command(bin + dummy + f.a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = test::run_command(bin + dummy + f.b + " --seed 7");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = test::run_command(bin + " lora merge -m " + stories() + " --lora " + f.a + ":0.5 -o " + f.merged);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return f;
  }();
  return f;
}

std::unique_ptr<Engine> engine_for(const std::string& path) {
  EngineConfig c = test::stories_config();
  c.model_path = path;
  return test::make_engine(c);
}

std::unique_ptr<Server> make_server(ServerOptions o, const std::string& path) {
  o.http.port = 0;
  o.model_path = path;
  o.version = "test";
  auto s = Server::create(o);
  EXPECT_TRUE(s.ok()) << s.error();
  if (!s.ok()) return nullptr;
  EXPECT_TRUE((*s)->attach_engine(engine_for(path), 0).ok());
  return std::move(s).value();
}

const char* kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day, she saw a big red ball in the grass and ran to get it. Her mom said";

json complete(httplib::Client& cli, const std::string& model, int* status = nullptr) {
  const json req = {{"model", model}, {"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}};
  auto r = cli.Post("/v1/completions", req.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  if (status) *status = r->status;
  return json::parse(r->body);
}

std::string text_of(const json& j) { return j.at("choices").at(0).at("text").get<std::string>(); }

}  // namespace

TEST(LoraServer, RegistryResolvesAdaptersToTheirBaseModel) {
  ModelSpec a, b;
  a.name = "small";
  a.aliases = {"s"};
  b.name = "big";
  b.loras = {{"sql", "/x/sql.gguf", 0.5f, ""}};
  ModelRegistry reg({a, b}, 0, [](size_t, const ModelSpec&, double*) -> Result<std::shared_ptr<LoadedModel>> {
    return Error{"no loads here"};
  });
  auto r = reg.resolve("sql");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->slot, 1u);
  EXPECT_EQ(r->adapter, "sql");
  EXPECT_FLOAT_EQ(r->adapter_scale, 0.5f);
  EXPECT_TRUE(reg.resolve("big")->adapter.empty());
  EXPECT_FALSE(reg.add_adapter(0, {"s", "/x/a.gguf", 1, ""}).ok());    // an alias
  EXPECT_FALSE(reg.add_adapter(0, {"sql", "/x/a.gguf", 1, ""}).ok());  // taken
  EXPECT_FALSE(reg.add_adapter(0, {"", "/x/a.gguf", 1, ""}).ok());
  ASSERT_TRUE(reg.add_adapter(0, {"chat", "/x/c.gguf", 1, ""}).ok());
  EXPECT_EQ(reg.resolve("chat")->slot, 0u);
  ASSERT_EQ(reg.adapters(0).size(), 1u);
  EXPECT_EQ(reg.adapters(0)[0].base, "small");
  EXPECT_EQ(reg.all_adapters().size(), 2u);
  EXPECT_EQ(reg.remove_adapter("chat"), std::optional<size_t>(0));
  EXPECT_FALSE(reg.remove_adapter("chat"));
  EXPECT_FALSE(reg.resolve("chat"));
}

TEST(LoraServer, CreateChecksAdapterNamesAndBases) {
  ServerOptions o;
  o.model_path = stories();
  o.http.port = 0;
  o.loras = {{"stories260K", files().a, 1, ""}};
  auto s = Server::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("is a model's name"), std::string::npos) << s.error();
  o.loras = {{"x", files().a, 1, ""}, {"x", files().b, 1, ""}};
  s = Server::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("two LoRA adapters are named 'x'"), std::string::npos) << s.error();
  o.loras = {{"x", files().a, 1, "nope"}};
  s = Server::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("no model is named 'nope'"), std::string::npos) << s.error();
}

TEST(LoraServer, AdapterAnswersLikeTheMergedModelInOneBatchWithTheBase) {
  // The merged model served alone: the reference answer.
  std::string want_adapter;
  {
    auto ref = make_server({}, files().merged);
    ASSERT_TRUE(ref);
    httplib::Client cli("127.0.0.1", ref->port());
    want_adapter = text_of(complete(cli, ""));
    ref->shutdown(5);
  }
  ServerOptions o;
  o.loras = {{"ad", files().a, 0.5f, ""}, {"bd", files().b, 1.0f, ""}};
  auto srv = make_server(o, stories());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  const std::string want_base = text_of(complete(cli, "stories260K"));
  ASSERT_NE(want_base, want_adapter);  // the adapter changes the answer

  // /v1/models: adapters are models whose parent is the base (vLLM's shape).
  const json models = json::parse(cli.Get("/v1/models")->body);
  ASSERT_EQ(models["data"].size(), 3u);
  EXPECT_EQ(models["data"][1]["id"], "ad");
  EXPECT_EQ(models["data"][1]["parent"], "stories260K");
  EXPECT_EQ(models["data"][1]["root"], files().a);
  EXPECT_EQ(json::parse(cli.Get("/v1/models/bd")->body)["parent"], "stories260K");

  // Concurrent: base, ad, bd, ad, base, ... in flight together (the engine batches them).
  const std::vector<std::string> names = {"stories260K", "ad", "bd", "ad", "stories260K", "bd", "ad", "stories260K"};
  std::vector<json> got(names.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < names.size(); ++i)
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", srv->port());
      got[i] = complete(c, names[i]);
    });
  for (auto& t : threads) t.join();
  std::string bd_text;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(got[i].contains("choices")) << got[i].dump();
    EXPECT_EQ(got[i]["model"], names[i]);  // the response names the adapter
    if (names[i] == "stories260K") {
      EXPECT_EQ(text_of(got[i]), want_base);
    }
    if (names[i] == "ad") {
      EXPECT_EQ(text_of(got[i]), want_adapter);
    }
    if (names[i] == "bd") {
      if (bd_text.empty()) bd_text = text_of(got[i]);
      EXPECT_EQ(text_of(got[i]), bd_text);
    }
  }
  EXPECT_NE(bd_text, want_base);
  EXPECT_NE(bd_text, want_adapter);

  int status = 0;
  const json nf = complete(cli, "no-such-adapter", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(nf["error"]["code"], "model_not_found");
  srv->shutdown(5);
}

TEST(LoraServer, RequestLoraListPicksTheAdapterAndItsScale) {
  // llama-server's per-request "lora": [{id, scale}]: "ad" is served at scale 1, asked at 0.5 it
  // answers like the model with it merged at 0.5 (greedy, token for token).
  std::string want_half;
  {
    auto ref = make_server({}, files().merged);
    ASSERT_TRUE(ref);
    httplib::Client cli("127.0.0.1", ref->port());
    want_half = text_of(complete(cli, ""));
    ref->shutdown(5);
  }
  ServerOptions o;
  o.loras = {{"ad", files().a, 1.0f, ""}, {"bd", files().b, 1.0f, ""}};
  auto srv = make_server(o, stories());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  const json list = json::parse(cli.Get("/lora-adapters")->body);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["id"], 0);
  EXPECT_EQ(list[0]["path"], files().a);
  EXPECT_EQ(list[1]["id"], 1);
  EXPECT_EQ(list[1]["model"], "stories260K");
  auto ask = [&](const std::string& model, const json& lora, int* status = nullptr) {
    const json req = {{"model", model}, {"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}, {"lora", lora}};
    auto r = cli.Post("/v1/completions", req.dump(), "application/json");
    EXPECT_TRUE(r);
    if (status) *status = r->status;
    return json::parse(r->body);
  };
  const std::string base = text_of(complete(cli, "stories260K"));
  const std::string full = text_of(complete(cli, "ad"));
  ASSERT_NE(full, want_half);
  json r = ask("stories260K", json::array({{{"id", 0}, {"scale", 0.5}}, {{"id", 1}, {"scale", 0}}}));
  EXPECT_EQ(text_of(r), want_half);
  EXPECT_EQ(r["model"], "stories260K");  // the name the request gave
  r = ask("ad", json::array({{{"id", 0}, {"scale", 0.5}}}));
  EXPECT_EQ(text_of(r), want_half);
  EXPECT_EQ(r["model"], "ad");
  EXPECT_EQ(text_of(ask("ad", json::array())), base);  // the list wins: no adapter
  EXPECT_EQ(text_of(ask("stories260K", json::array({{{"id", 0}}}))), full);  // scale defaults to 1
  for (const json& bad : {json::array({{{"id", 0}, {"scale", 0.5}}, {{"id", 1}, {"scale", 1}}}),
                          json::array({{{"id", 2}, {"scale", 1}}}), json::array({{{"scale", 1}}}), json("x"),
                          json::array({{{"id", 0}, {"scale", "big"}}})}) {
    int status = 0;
    const json e = ask("stories260K", bad, &status);
    EXPECT_EQ(status, 400) << bad.dump();
    EXPECT_EQ(e["error"]["param"], "lora") << bad.dump();
  }
  // llama-server's POST /lora-adapters: a global scale for the base model's requests that name no
  // adapter (0 by default, llama-server's --lora-init-without-apply); "lora" lists and adapter names win
  EXPECT_EQ(json::parse(cli.Get("/lora-adapters")->body)[0]["global_scale"], 0.0);
  auto set = [&](const json& body) { return cli.Post("/lora-adapters", body.dump(), "application/json"); };
  auto ok = set(json::array({{{"id", 0}, {"scale", 0.5}}, {{"id", 1}, {"scale", 0}}}));
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body), json({{"success", true}}));
  EXPECT_EQ(json::parse(cli.Get("/lora-adapters")->body)[0]["global_scale"], 0.5);
  r = complete(cli, "stories260K");
  EXPECT_EQ(text_of(r), want_half);
  EXPECT_EQ(r["model"], "stories260K");
  EXPECT_EQ(text_of(ask("stories260K", json::array())), base);  // a request's own (empty) list wins
  EXPECT_EQ(text_of(complete(cli, "ad")), full);                 // as does an adapter's name
  for (const json& bad : {json::array({{{"id", 0}, {"scale", 1}}, {{"id", 1}, {"scale", 1}}}),
                          json::array({{{"id", 7}}}), json("x"), json::array({{{"id", 0}, {"model", "nope"}}})}) {
    auto e = set(bad);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 400) << bad.dump() << e->body;
  }
  EXPECT_EQ(text_of(complete(cli, "stories260K")), want_half);  // (a refused POST changed nothing)
  ASSERT_EQ(set(json::array())->status, 200);                   // adapters left out: scale 0
  EXPECT_EQ(text_of(complete(cli, "stories260K")), base);
  srv->shutdown(5);
}

TEST(LoraServer, PrefixCacheDoesNotMixAdapters) {
  ServerOptions o;
  o.loras = {{"ad", files().a, 0.5f, ""}};
  auto srv = make_server(o, stories());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  auto cached = [](const json& j) { return j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(); };
  const json base1 = complete(cli, "stories260K");
  const json base2 = complete(cli, "stories260K");
  EXPECT_GT(cached(base2), 0);  // the base's prefix is cached
  const json ad1 = complete(cli, "ad");
  EXPECT_EQ(cached(ad1), 0);  // ... but not for the adapter
  const json ad2 = complete(cli, "ad");
  EXPECT_GT(cached(ad2), 0);
  EXPECT_EQ(text_of(ad1), text_of(ad2));
  EXPECT_NE(text_of(ad1), text_of(base1));
  const json base3 = complete(cli, "stories260K");
  EXPECT_EQ(text_of(base3), text_of(base1));
  srv->shutdown(5);
}

TEST(LoraServer, LoadAndUnloadAtRunTime) {
  ServerOptions o;
  o.api_keys = {"k"};
  auto srv = make_server(o, stories());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  const httplib::Headers key = {{"Authorization", "Bearer k"}};
  auto post = [&](const std::string& path, const json& body, bool with_key = true) {
    auto r = with_key ? cli.Post(path, key, body.dump(), "application/json") : cli.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r;
  };
  const json gen = {{"model", "late"}, {"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}};
  EXPECT_EQ(post("/v1/completions", gen)->status, 404);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "late"}, {"lora_path", files().a}}, false)->status, 401);

  auto r = post("/v1/load_lora_adapter", {{"lora_name", "late"}, {"lora_path", files().a}, {"lora_scale", 0.5}});
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("late"), std::string::npos);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  r = post("/v1/completions", gen);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string with_adapter = json::parse(r->body)["choices"][0]["text"];
  EXPECT_EQ(json::parse(r->body)["model"], "late");
  EXPECT_EQ(json::parse(cli.Get("/v1/models", key)->body)["data"][1]["id"], "late");

  // Errors: taken name, a model's name, missing fields, an unreadable or non-adapter file, unknown base.
  r = post("/v1/load_lora_adapter", {{"lora_name", "late"}, {"lora_path", files().b}});
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("already been loaded"), std::string::npos) << r->body;
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "stories260K"}, {"lora_path", files().b}})->status, 400);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "x"}})->status, 400);
  r = post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", stories()}});
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("not a LoRA adapter"), std::string::npos) << r->body;
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", "/no/such.gguf"}})->status, 400);
  r = post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", files().b}, {"base_model_name", "nope"}});
  EXPECT_EQ(r->status, 404);

  // Unload: later requests 404, a second unload 404.
  r = post("/v1/unload_lora_adapter", {{"lora_name", "late"}});
  EXPECT_EQ(r->status, 200) << r->body;
  r = post("/v1/completions", gen);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
  r = post("/v1/unload_lora_adapter", {{"lora_name", "late"}});
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");

  // Loaded again under the same name: the same answer (a fresh load, no stale cache).
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "late"}, {"lora_path", files().a}, {"lora_scale", 0.5}})->status,
            200);
  r = post("/v1/completions", gen);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], with_adapter);
  srv->shutdown(5);
}

TEST(LoraServer, ModelsFileLoras) {
  const std::string text = R"(
models:
  - name: base
    file: base.gguf
    max_loras: 4
    loras:
      - sql=adapters/sql.gguf
      - /abs/chat.gguf
      - {name: poet, file: poet.gguf, scale: 0.25}
)";
  auto f = parse_models_file(text, "models.yaml", "/etc/tm");
  ASSERT_TRUE(f.ok()) << f.error();
  const auto& l = f->models[0].spec.loras;
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].name, "sql");
  EXPECT_EQ(l[0].path, "/etc/tm/adapters/sql.gguf");
  EXPECT_EQ(l[1].name, "chat");
  EXPECT_EQ(l[1].path, "/abs/chat.gguf");
  EXPECT_EQ(l[2].name, "poet");
  EXPECT_FLOAT_EQ(l[2].scale, 0.25f);
  EXPECT_EQ(f->models[0].engine.max_loras, std::optional<int32_t>(4));
  auto bad = parse_models_file("models:\n  - file: a.gguf\n    loras: {x: 1}\n", "m.yaml", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("'loras'"), std::string::npos) << bad.error();
  bad = parse_models_file("models:\n  - file: a.gguf\n    loras: [{name: x, path: a.gguf}]\n", "m.yaml", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("path"), std::string::npos) << bad.error();
}

TEST(LoraServer, AdapterOfAnOnDemandModelLoadsWithIt) {
  std::string want;
  {
    auto ref = make_server({}, files().merged);
    ASSERT_TRUE(ref);
    httplib::Client cli("127.0.0.1", ref->port());
    want = text_of(complete(cli, ""));
    ref->shutdown(5);
  }
  ServerOptions o;
  o.http.port = 0;
  o.version = "test";
  ModelSpec m;
  m.name = "od";
  m.path = stories();
  m.pinned = false;
  o.models = {m};
  o.engine_loader = [](const ModelSpec& spec, double*) { return Result<std::unique_ptr<Engine>>(engine_for(spec.path)); };
  auto s = Server::create(o);
  ASSERT_TRUE(s.ok()) << s.error();
  auto& srv = *s;
  ASSERT_TRUE(srv->load_pinned_models().ok());
  httplib::Client cli("127.0.0.1", srv->port());
  auto post = [&](const std::string& path, const json& body) {
    auto r = cli.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r;
  };
  // Registered while the model is unloaded: checked for existence only, loaded with the model.
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", "/no/such.gguf"}})->status, 400);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "ad"}, {"lora_path", files().a}, {"lora_scale", 0.5}})->status,
            200);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "bogus"}, {"lora_path", stories()}})->status, 200);
  EXPECT_EQ(json::parse(cli.Get("/v1/models/ad")->body)["state"], "unloaded");
  const json got = complete(cli, "ad");
  ASSERT_TRUE(got.contains("choices")) << got.dump();
  EXPECT_EQ(got["model"], "ad");
  EXPECT_EQ(text_of(got), want);
  // The adapter that is not one was dropped when the model loaded (with a warning), not the model.
  int status = 0;
  complete(cli, "bogus", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(json::parse(cli.Get("/v1/models")->body)["data"].size(), 2u);
  srv->shutdown(5);
}

TEST(LoraServer, LoraRequestsInfoMetric) {
  ServerOptions o;
  o.loras = {{"ad", files().a, 0.5f, ""}};
  auto srv = make_server(o, stories());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  auto info_line = [&]() -> std::string {
    const std::string body = cli.Get("/metrics")->body;
    const size_t at = body.find("\nvllm:lora_requests_info{");
    return at == std::string::npos ? "" : body.substr(at + 1, body.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(info_line().find(R"(running_lora_adapters="",waiting_lora_adapters="",max_lora="8")"), std::string::npos)
      << info_line();
  // A long adapter request: seen running while it generates.
  std::thread t([&] {
    httplib::Client c("127.0.0.1", srv->port());
    const json req = {{"model", "ad"}, {"prompt", "Once"}, {"max_tokens", 400}, {"temperature", 0}, {"ignore_eos", true}};
    c.Post("/v1/completions", req.dump(), "application/json");
  });
  bool seen = false;
  for (int i = 0; i < 400 && !seen; ++i) {
    seen = info_line().find(R"(running_lora_adapters="ad")") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  t.join();
  EXPECT_TRUE(seen);
  // The engine reports the request done just after its last output: poll briefly.
  std::string after;
  for (int i = 0; i < 500; ++i) {
    after = info_line();
    if (after.find(R"(running_lora_adapters="",waiting_lora_adapters="")") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_NE(after.find(R"(running_lora_adapters="",waiting_lora_adapters="")"), std::string::npos) << after;
  // One series per model: the old label sets are gone.
  const std::string body = cli.Get("/metrics")->body;
  size_t n = 0;
  for (size_t at = body.find("\nvllm:lora_requests_info{"); at != std::string::npos;
       at = body.find("\nvllm:lora_requests_info{", at + 1))
    ++n;
  EXPECT_EQ(n, 1u);
  srv->shutdown(5);
}

TEST(LoraServer, RouterChainsMayNameAdapters) {
  ServerOptions o;
  o.loras = {{"ad", files().a, 0.5f, ""}};
  RouterSpec r;
  r.name = "auto";
  r.default_chain = {"ad"};
  RouteRule base_rule;
  base_rule.name = "plain";
  base_rule.header_name = "X-Tier";
  base_rule.header_equals = "base";
  base_rule.chain = {"stories260K"};
  r.rules = {base_rule};
  o.routers = {r};
  auto srv = make_server(o, stories());
  ASSERT_TRUE(srv);
  httplib::Client cli("127.0.0.1", srv->port());
  const std::string want_ad = text_of(complete(cli, "ad"));
  const std::string want_base = text_of(complete(cli, "stories260K"));
  ASSERT_NE(want_ad, want_base);
  const json req = {{"model", "auto"}, {"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}};
  auto a = cli.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_EQ(a->status, 200) << a->body;
  EXPECT_EQ(json::parse(a->body)["model"], "ad");
  EXPECT_EQ(text_of(json::parse(a->body)), want_ad);
  EXPECT_EQ(a->get_header_value("X-Tokenmill-Route"), "auto/default");
  auto b = cli.Post("/v1/completions", {{"X-Tier", "base"}}, req.dump(), "application/json");
  ASSERT_EQ(b->status, 200) << b->body;
  EXPECT_EQ(json::parse(b->body)["model"], "stories260K");
  EXPECT_EQ(text_of(json::parse(b->body)), want_base);
  srv->shutdown(5);
}
