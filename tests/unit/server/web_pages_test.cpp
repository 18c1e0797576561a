// The web pages' routes over loopback HTTP: GET / and /dashboard serve the embedded HTML with a
// strict Content-Security-Policy, /ui/<file> the assets (an HTML file or an unknown one is 404),
// /ui/info the facts behind the API key, and --no-ui (no_ui) turns all of it off while /health,
// /metrics and the API keep working. (The pages in a browser: tests/e2e/ui.test.mjs.)
#include <gtest/gtest.h>

#include <httplib.h>

#include "engine/engine.h"
#include "server/server.h"
#include "test_support.h"
#include "server_test_engine.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::unique_ptr<Server> serve(ServerOptions o) {
  o.http.port = 0;
  o.model_path = test::source_path("models/stories260K/stories260K.gguf");
  o.version = "test";
  auto s = Server::create(o);
  EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE((*s)->attach_engine(test::stories_engine(1, 4), 0.25).ok());
  return std::move(s).value();
}

}  // namespace

TEST(WebPages, PagesAndAssetsAreServedWithACsp) {
  ServerOptions o;
  o.api_keys = {"sekrit"};
  auto srv = serve(o);
  httplib::Client cli("127.0.0.1", srv->port());
  for (const char* page : {"/", "/dashboard"}) {
    auto r = cli.Get(page);  // no key needed for the page itself
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << page;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(r->get_header_value("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_NE(r->body.find("<script src=\"/ui/common.js\""), std::string::npos) << page;
  }
  EXPECT_NE(cli.Get("/")->body.find("/ui/chat.js"), std::string::npos);
  EXPECT_NE(cli.Get("/dashboard")->body.find("/ui/dashboard.js"), std::string::npos);
  auto js = cli.Get("/ui/chat.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(cli.Get("/ui/ui.css")->get_header_value("Content-Type"), "text/css; charset=utf-8");
  EXPECT_EQ(cli.Get("/ui/chat.html")->status, 404);  // pages only at their own paths
  EXPECT_EQ(cli.Get("/ui/nothing.js")->status, 404);
  EXPECT_EQ(cli.Get("/ui/")->status, 404);
  EXPECT_EQ(cli.Post("/", "{}", "application/json")->status, 405);

  auto info = cli.Get("/ui/info");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, 401);
  info = cli.Get("/ui/info", {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(info);
  ASSERT_EQ(info->status, 200);
  const json j = json::parse(info->body);
  EXPECT_EQ(j["version"], "test");
  EXPECT_EQ(j["api_key_required"], true);
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["id"], "stories260K");
  EXPECT_EQ(j["models"][0]["architecture"], "llama");
  EXPECT_EQ(j["models"][0]["weight_type"], "F32");
  EXPECT_EQ(j["models"][0]["max_model_len"], 512);
  EXPECT_GT(j["models"][0]["memory_plan"]["kv_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["models"][0]["memory_plan"]["weight_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["models"][0]["memory_plan"]["device"], "cpu");
  srv->shutdown(5);
}

TEST(WebPages, NoUiTurnsThemOffAndLeavesTheRestAlone) {
  ServerOptions o;
  o.no_ui = true;
  auto srv = serve(o);
  httplib::Client cli("127.0.0.1", srv->port());
  for (const char* p : {"/", "/dashboard", "/ui/chat.js", "/ui/info"}) {
    auto r = cli.Get(p);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << p;
    EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("--no-ui"), std::string::npos);
  }
  EXPECT_EQ(cli.Get("/health")->status, 200);
  EXPECT_EQ(cli.Get("/metrics")->status, 200);
  EXPECT_EQ(cli.Get("/v1/models")->status, 200);
  auto gen = cli.Post("/v1/completions", R"({"prompt":"Once","max_tokens":3})", "application/json");
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->status, 200);
  srv->shutdown(5);
}
