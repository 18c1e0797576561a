// API keys with names, roles and limits: the key file's format and its errors (which never show a
// key), the per-key limiter (concurrency, tokens per minute over a sliding minute, Retry-After), and
// the KeyStore (lookup, reload keeping each name's limiter, a broken file keeping the old keys).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "server/api_keys.h"
#include "server/rate_limit.h"
#include "test_support.h"

using namespace tmill;
using namespace tmill::server;

namespace {

KeyLimiter::Clock::time_point at(double s) {
  return KeyLimiter::Clock::time_point{} +
         std::chrono::duration_cast<KeyLimiter::Clock::duration>(std::chrono::duration<double>(s));
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST(ApiKeyFile, ParsesNamesRolesAndLimits) {
  auto k = parse_api_key_file(R"(
keys:
  - name: alice
    key: sk-alice-0123456789
    role: admin
  - name: bob.ci_1
    key: "sk-bob-abcdefgh"
    max_concurrent_requests: 2
    tokens_per_minute: 1000
)", "keys.yaml");
  ASSERT_TRUE(k.ok()) << k.error();
  ASSERT_EQ(k->size(), 2u);
  EXPECT_EQ((*k)[0].name, "alice");
  EXPECT_EQ((*k)[0].key, "sk-alice-0123456789");
  EXPECT_EQ((*k)[0].role, KeyRole::Admin);
  EXPECT_FALSE((*k)[0].limits.any());
  EXPECT_EQ((*k)[1].role, KeyRole::User);  // the default
  EXPECT_EQ((*k)[1].limits.max_concurrent_requests, 2);
  EXPECT_EQ((*k)[1].limits.tokens_per_minute, 1000);
  auto empty = parse_api_key_file("keys: []\n", "k");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(ApiKeyFile, ErrorsNameTheEntryAndLineButNeverTheKey) {
  const std::string secret = "sk-very-secret-123";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"keys:\n  - {name: a, key: " + secret + ", colour: red}\n", "key 'a': unknown key 'colour'"},
      {"keys:\n  - {name: a, key: " + secret + "}\n  - {name: a, key: sk-other-123456}\n", "two keys are named 'a'"},
      {"keys:\n  - {name: a, key: " + secret + "}\n  - {name: b, key: " + secret + "}\n",
       "key 'b': the same key is given to another entry"},
      {"keys:\n  - {name: a, key: short}\n", "'key' must be 8 to 512 printable ASCII"},
      {"keys:\n  - {name: a, key: \"" + secret + " x\"}\n", "'key' must be 8 to 512 printable ASCII"},
      {"keys:\n  - {key: " + secret + "}\n", "key #1: 'name' is required"},
      {"keys:\n  - {name: 'a b', key: " + secret + "}\n", "'name' is required: 1 to 64 of"},
      {"keys:\n  - {name: a}\n", "key 'a': 'key' (the bearer token) is required"},
      {"keys:\n  - {name: a, key: " + secret + ", role: root}\n", "key 'a': 'role' must be admin or user"},
      {"keys:\n  - {name: a, key: " + secret + ", tokens_per_minute: -5}\n",
       "key 'a': 'tokens_per_minute' must be a whole number >= 0"},
      {"keys:\n  - {name: a, key: " + secret + ", max_concurrent_requests: many}\n",
       "'max_concurrent_requests' must be a whole number"},
      {"api_keys: []\n", "expected a mapping with 'keys:'"},
      {"keys: {a: b}\n", "'keys' must be a list"},
      {"keys:\n  - [" + secret + "\n", "k:"},  // yaml-cpp's syntax error, placed
  };
  for (const Case& c : cases) {
    auto r = parse_api_key_file(c.text, "k");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << r.error();
    EXPECT_EQ(r.error().find(secret), std::string::npos) << "the key leaked into: " << r.error();
  }
}

TEST(KeyLimiter, ConcurrencyLimit) {
  KeyLimiter lim;
  lim.set_limits({2, 0});
  LimitState a = lim.try_acquire(at(10));
  ASSERT_TRUE(a.admitted);
  EXPECT_EQ(a.remaining_requests, 1);
  ASSERT_TRUE(lim.try_acquire(at(10)).admitted);
  LimitState c = lim.try_acquire(at(10));
  EXPECT_FALSE(c.admitted);
  EXPECT_STREQ(c.refused_by, "requests");
  EXPECT_EQ(c.remaining_requests, 0);
  EXPECT_GE(c.retry_after_s, 1.0);
  lim.release();
  EXPECT_TRUE(lim.try_acquire(at(10)).admitted);
  EXPECT_EQ(lim.running(), 2);
}

TEST(KeyLimiter, TokensPerMinuteSlideOut) {
  KeyLimiter lim;
  lim.set_limits({0, 100});
  ASSERT_TRUE(lim.try_acquire(at(1000.25)).admitted);
  lim.charge(60, at(1000.25));
  lim.release();
  LimitState s = lim.try_acquire(at(1010.25));  // 60 < 100: admitted
  ASSERT_TRUE(s.admitted);
  EXPECT_EQ(s.remaining_tokens, 40);
  EXPECT_DOUBLE_EQ(s.reset_tokens_s, 50);  // second 1000 leaves at 1060
  lim.charge(50, at(1010.25));             // 110: over
  lim.release();
  LimitState r = lim.try_acquire(at(1010.25));
  EXPECT_FALSE(r.admitted);
  EXPECT_STREQ(r.refused_by, "tokens");
  EXPECT_EQ(r.remaining_tokens, 0);
  EXPECT_NEAR(r.retry_after_s, 49.75, 1e-6);  // once the 60 of second 1000 have left, 50 < 100
  EXPECT_DOUBLE_EQ(r.reset_tokens_s, 60);     // the 50 of second 1010 leave at 1070
  EXPECT_FALSE(lim.try_acquire(at(1059.9)).admitted);
  LimitState later = lim.try_acquire(at(1060.5));
  ASSERT_TRUE(later.admitted);
  EXPECT_EQ(later.remaining_tokens, 50);
  EXPECT_DOUBLE_EQ(later.reset_tokens_s, 10);
  EXPECT_EQ(lim.window_tokens(at(1070.0)), 0);  // everything slid out
  EXPECT_EQ(lim.window_tokens(at(5000.0)), 0);
  EXPECT_EQ(format_reset(0.25), "250ms");
  EXPECT_EQ(format_reset(10), "10s");
  EXPECT_EQ(format_reset(90), "1m30s");
  EXPECT_EQ(format_reset(0), "0s");
}

TEST(KeyStore, LookupReloadAndABrokenFile) {
  const std::string dir = test::temp_dir();
  const std::string file = dir + "/keys.yaml";
  write(file, "keys:\n  - {name: alice, key: sk-alice-0001, role: admin}\n"
              "  - {name: bob, key: sk-bob-00002, max_concurrent_requests: 1}\n");
  auto made = KeyStore::create({"cli-key"}, file);
  ASSERT_TRUE(made.ok()) << made.error();
  KeyStore& s = **made;
  EXPECT_TRUE(s.enabled());
  EXPECT_TRUE(s.has_file());
  EXPECT_EQ(s.names(), (std::vector<std::string>{"api-key-1", "alice", "bob"}));
  ASSERT_TRUE(s.find("cli-key"));
  EXPECT_EQ(s.find("cli-key")->role, KeyRole::Admin);  // --api-key keys are admin keys, unlimited
  EXPECT_FALSE(s.find("cli-key")->limiter);
  EXPECT_EQ(s.find("sk-alice-0001")->name, "alice");
  EXPECT_FALSE(s.find("sk-alice-000"));
  EXPECT_FALSE(s.find(""));
  auto bob = s.find("sk-bob-00002");
  ASSERT_TRUE(bob && bob->limiter);
  EXPECT_EQ(bob->role, KeyRole::User);
  ASSERT_TRUE(bob->limiter->try_acquire(at(1)).admitted);  // a request of bob's is running

  // A reload: bob's key changes and his limit rises; his running request still counts.
  write(file, "keys:\n  - {name: bob, key: sk-bob-new-3, max_concurrent_requests: 2}\n");
  auto n = s.reload();
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 2u);  // cli-key + bob
  EXPECT_FALSE(s.find("sk-alice-0001"));
  EXPECT_FALSE(s.find("sk-bob-00002"));
  auto bob2 = s.find("sk-bob-new-3");
  ASSERT_TRUE(bob2 && bob2->limiter);
  EXPECT_EQ(bob2->limiter.get(), bob->limiter.get());
  EXPECT_EQ(bob2->limiter->running(), 1);
  EXPECT_TRUE(bob2->limiter->try_acquire(at(1)).admitted);
  EXPECT_FALSE(bob2->limiter->try_acquire(at(1)).admitted);

  // A broken file: an error, and the keys stay.
  write(file, "keys:\n  - {name: bob, key: sk-bob-new-3, role: superuser}\n");
  auto bad = s.reload();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("'role' must be admin or user"), std::string::npos) << bad.error();
  EXPECT_TRUE(s.find("sk-bob-new-3"));
  std::remove(file.c_str());
  EXPECT_FALSE(s.reload().ok());
  EXPECT_TRUE(s.find("sk-bob-new-3"));

  // A file key that is also an --api-key key is refused; no keys at all: off.
  write(file, "keys:\n  - {name: a, key: cli-key-long}\n");
  auto dup = KeyStore::create({"cli-key-long"}, file);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().find("cli-key-long"), std::string::npos) << dup.error();
  auto none = KeyStore::create({}, "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE((*none)->enabled());
  auto missing = KeyStore::create({}, dir + "/nope.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("--api-key-file"), std::string::npos) << missing.error();
}
