// ModelRegistry with fake models (no engine, sizes given): names and aliases, the memory budget
// (each file counted once, LRU unloading of idle unpinned models, pinned and busy ones kept), idle
// unloading and keep_alive, load failures, and loads that do not block other models.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "server/model_registry.h"

using namespace tmill;
using namespace tmill::server;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t MiB = 1ull << 20;

ModelSpec spec(const std::string& name, const std::string& file, uint64_t file_mib, uint64_t kv_mib, bool pinned) {
  ModelSpec s;
  s.name = name;
  s.path = file;
  s.file_bytes = file_mib * MiB;
  s.kv_bytes = kv_mib * MiB;
  s.pinned = pinned;
  return s;
}

// Loads instantly; the loaded model's anonymous memory is the configured KV size.
struct FakeLoader {
  std::atomic<int> calls{0};
  std::string fail_for;
  ModelLoader fn() {
    return [this](size_t, const ModelSpec& s, double* secs) -> Result<std::shared_ptr<LoadedModel>> {
      ++calls;
      *secs = 0;
      if (s.name == fail_for) return Error{"broken file"};
      auto m = std::make_shared<LoadedModel>();
      m->ctx.served_model_name = s.name;
      m->ctx.max_model_len = 128;
      m->anon_bytes = s.kv_bytes;
      return m;
    };
  }
};

}  // namespace

TEST(ModelRegistry, ResolvesNamesAndAliases) {
  FakeLoader fl;
  auto a = spec("a", "a.gguf", 1, 1, true);
  a.aliases = {"fast", "tiny"};
  ModelRegistry reg({a, spec("b", "b.gguf", 1, 1, true)}, 0, fl.fn());
  EXPECT_EQ(reg.resolve("a")->slot, 0u);
  EXPECT_EQ(reg.resolve("tiny")->slot, 0u);
  EXPECT_EQ(reg.resolve("b")->slot, 1u);
  EXPECT_EQ(reg.resolve("")->slot, 0u);  // no "model": the first
  EXPECT_FALSE(reg.resolve("c"));
  EXPECT_TRUE(reg.resolve("b")->adapter.empty());
}

TEST(ModelRegistry, LoadsOnDemandAndCountsASharedFileOnce) {
  FakeLoader fl;
  ModelRegistry reg({spec("a", "same.gguf", 100, 10, true), spec("b", "same.gguf", 100, 20, false)}, 0, fl.fn());
  EXPECT_EQ(reg.view(1).state, ModelState::Unloaded);
  ASSERT_TRUE(reg.load(0).ok());
  auto lease = reg.acquire(1, 5);
  ASSERT_TRUE(lease.ok()) << lease.error();
  EXPECT_EQ(lease->model().ctx.served_model_name, "b");
  EXPECT_EQ(reg.view(1).state, ModelState::Loaded);
  EXPECT_EQ(reg.view(1).inflight, 1);
  EXPECT_EQ(reg.used_bytes(), (100 + 10 + 20) * MiB);  // the file once, both KV caches
  EXPECT_EQ(fl.calls.load(), 2);
}

TEST(ModelRegistry, BudgetUnloadsTheLeastRecentlyUsedIdleModel) {
  FakeLoader fl;
  // Budget 250 MiB: the pinned model (100) plus one of the on-demand ones (100 each).
  ModelRegistry reg({spec("p", "p.gguf", 90, 10, true), spec("x", "x.gguf", 90, 10, false),
                     spec("y", "y.gguf", 90, 10, false), spec("z", "z.gguf", 40, 10, false)},
                    250 * MiB, fl.fn());
  ASSERT_TRUE(reg.load(0).ok());
  { ASSERT_TRUE(reg.acquire(1, 5).ok()); }  // x loaded, then idle
  EXPECT_EQ(reg.view(1).state, ModelState::Loaded);
  { ASSERT_TRUE(reg.acquire(2, 5).ok()); }  // y needs x's room: x goes
  EXPECT_EQ(reg.view(1).state, ModelState::Unloaded);
  EXPECT_EQ(reg.view(2).state, ModelState::Loaded);
  EXPECT_LE(reg.used_bytes(), reg.memory_limit());
  EXPECT_EQ(reg.unloads(), 1);
  // z (50) fits beside p and y? 100 + 100 + 50 = 250: yes, nothing unloaded.
  { ASSERT_TRUE(reg.acquire(3, 5).ok()); }
  EXPECT_EQ(reg.view(2).state, ModelState::Loaded);
  EXPECT_EQ(reg.view(3).state, ModelState::Loaded);
  // x again: the least recently used of y and z (y) goes, and z stays.
  { ASSERT_TRUE(reg.acquire(1, 5).ok()); }
  EXPECT_EQ(reg.view(2).state, ModelState::Unloaded);
  EXPECT_EQ(reg.view(3).state, ModelState::Loaded);
  EXPECT_LE(reg.used_bytes(), reg.memory_limit());
  EXPECT_EQ(reg.view(0).state, ModelState::Loaded);  // pinned: never unloaded
}

TEST(ModelRegistry, BusyAndPinnedModelsAreNotUnloadedAndTheErrorSaysWhy) {
  FakeLoader fl;
  ModelRegistry reg({spec("p", "p.gguf", 90, 10, true), spec("x", "x.gguf", 90, 10, false),
                     spec("y", "y.gguf", 90, 10, false)},
                    200 * MiB, fl.fn());
  ASSERT_TRUE(reg.load(0).ok());
  auto busy = reg.acquire(1, 5);  // x serving a request
  ASSERT_TRUE(busy.ok());
  ModelRegistry::Failure why{};
  auto y = reg.acquire(2, 5, &why);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(why, ModelRegistry::Failure::Unavailable);
  EXPECT_NE(y.error().find("`y` needs"), std::string::npos) << y.error();
  EXPECT_NE(y.error().find("p (pinned)"), std::string::npos) << y.error();
  EXPECT_NE(y.error().find("x (busy)"), std::string::npos) << y.error();
  EXPECT_EQ(reg.view(2).state, ModelState::Unloaded);
  EXPECT_FALSE(reg.unload(1).ok());  // busy: the admin unload is refused too
  busy->release();
  EXPECT_TRUE(reg.acquire(2, 5).ok());  // now x can go
  EXPECT_EQ(reg.view(1).state, ModelState::Unloaded);
}

TEST(ModelRegistry, IdleUnloadAndKeepAlive) {
  FakeLoader fl;
  auto x = spec("x", "x.gguf", 1, 1, false);
  x.idle_unload_s = 60;
  ModelRegistry reg({x, spec("y", "y.gguf", 1, 1, false)}, 0, fl.fn());
  const auto now = std::chrono::steady_clock::now();
  { ASSERT_TRUE(reg.acquire(0, 5).ok()); }
  reg.reap(now + 30s);
  EXPECT_EQ(reg.view(0).state, ModelState::Loaded);
  reg.reap(now + 61s);
  EXPECT_EQ(reg.view(0).state, ModelState::Unloaded);
  // y has no idle time: only unloaded for room, unless a request's keep_alive says otherwise.
  { ASSERT_TRUE(reg.acquire(1, 5).ok()); }
  reg.reap(now + 3600s);
  EXPECT_EQ(reg.view(1).state, ModelState::Loaded);
  {
    auto l = reg.acquire(1, 5);
    reg.set_keep_alive(1, 0);  // Ollama: unload as soon as the request is done
  }
  reg.reap(std::chrono::steady_clock::now());
  EXPECT_EQ(reg.view(1).state, ModelState::Unloaded);
  {
    auto l = reg.acquire(0, 5);
    reg.set_keep_alive(0, -1);  // forever, overriding idle_unload once
  }
  reg.reap(now + 100000s);
  EXPECT_EQ(reg.view(0).state, ModelState::Loaded);
}

TEST(ModelRegistry, LoadFailureIsReportedAndRetried) {
  FakeLoader fl;
  fl.fail_for = "x";
  ModelRegistry reg({spec("x", "x.gguf", 1, 1, false)}, 0, fl.fn());
  ModelRegistry::Failure why{};
  auto l = reg.acquire(0, 5, &why);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(why, ModelRegistry::Failure::LoadFailed);
  EXPECT_NE(l.error().find("broken file"), std::string::npos);
  EXPECT_EQ(reg.view(0).last_error, "broken file");
  EXPECT_FALSE(reg.acquire(0, 5).ok());
  EXPECT_EQ(fl.calls.load(), 2);  // tried again
}

TEST(ModelRegistry, ALoadDoesNotBlockOtherModelsAndTimesOut) {
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  ModelLoader slow = [gate](size_t, const ModelSpec& s, double*) -> Result<std::shared_ptr<LoadedModel>> {
    if (s.name == "slow") gate.wait();
    auto m = std::make_shared<LoadedModel>();
    m->ctx.served_model_name = s.name;
    return m;
  };
  ModelRegistry reg({spec("fast", "f.gguf", 1, 1, true), spec("slow", "s.gguf", 1, 1, false)}, 0, slow);
  ASSERT_TRUE(reg.load(0).ok());
  ModelRegistry::Failure why{};
  auto waiting = reg.acquire(1, 0.05, &why);  // the load goes on after the wait gives up
  EXPECT_FALSE(waiting.ok());
  EXPECT_EQ(why, ModelRegistry::Failure::Timeout);
  EXPECT_EQ(reg.view(1).state, ModelState::Loading);
  auto other = reg.acquire(0, 0.05);  // the loaded model is served meanwhile
  EXPECT_TRUE(other.ok());
  go.set_value();
  auto done = reg.acquire(1, 5);
  ASSERT_TRUE(done.ok()) << done.error();
  EXPECT_EQ(done->model().ctx.served_model_name, "slow");
}

TEST(ModelRegistry, ParsesDurations) {
  EXPECT_DOUBLE_EQ(*parse_duration_seconds("300"), 300);
  EXPECT_DOUBLE_EQ(*parse_duration_seconds("90s"), 90);
  EXPECT_DOUBLE_EQ(*parse_duration_seconds("5m"), 300);
  EXPECT_DOUBLE_EQ(*parse_duration_seconds("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*parse_duration_seconds("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_duration_seconds("-1"), -1);
  EXPECT_FALSE(parse_duration_seconds("").ok());
  EXPECT_FALSE(parse_duration_seconds("5 minutes").ok());
  EXPECT_FALSE(parse_duration_seconds("m").ok());
  EXPECT_FALSE(parse_duration_seconds("1h30").ok());
  // Found reviewing the parser for fuzz_models_file: a lone "-" was 0 s, "1.2.3s" was 1.2 s, and 1e300 h was infinite
  // (an infinite idle time overflowed the clock's integer duration).
  for (std::string bad : {std::string("-"), std::string("1.2.3s"), std::string("."), std::string(400, '9'),
                          std::string(300, '9') + "h"})
    EXPECT_FALSE(parse_duration_seconds(bad).ok()) << bad;
}

TEST(ModelRegistry, TheRealSizeAfterLoadingIsCheckedAgainstTheBudget) {
  // "auto" configures no KV size (estimate 0); its engine plans 60 MiB.
  ModelLoader big_kv = [](size_t, const ModelSpec& s, double*) -> Result<std::shared_ptr<LoadedModel>> {
    auto m = std::make_shared<LoadedModel>();
    m->anon_bytes = s.name == "auto" ? 60 * MiB : s.kv_bytes;
    return m;
  };
  ModelRegistry reg({spec("p", "p.gguf", 40, 10, true), spec("x", "x.gguf", 20, 10, false),
                     spec("auto", "a.gguf", 20, 0, false)},
                    110 * MiB, big_kv);
  ASSERT_TRUE(reg.load(0).ok());
  { ASSERT_TRUE(reg.acquire(1, 5).ok()); }  // 50 + 30 = 80
  // auto: estimated 20 (fits beside both), really 80: even with x unloaded 50 + 80 > 110, so refused.
  ModelRegistry::Failure why{};
  auto l = reg.acquire(2, 5, &why);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(why, ModelRegistry::Failure::LoadFailed);
  EXPECT_NE(l.error().find("once loaded"), std::string::npos) << l.error();
  EXPECT_EQ(reg.view(2).state, ModelState::Unloaded);
  EXPECT_EQ(reg.view(1).state, ModelState::Loaded);  // not unloaded in vain
  EXPECT_LE(reg.used_bytes(), reg.memory_limit());
}
