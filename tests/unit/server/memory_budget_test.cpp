// MemoryBudget (the transport's request memory) and request_memory_estimate.
#include "server/memory_budget.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

using namespace tmill::server;

TEST(MemoryBudget, ReservesUpToTheLimitAndGivesBack) {
  MemoryBudget b(1000);
  EXPECT_TRUE(b.try_reserve(600));
  EXPECT_FALSE(b.try_reserve(401));  // nothing counted when it does not fit
  EXPECT_EQ(b.used(), 600u);
  EXPECT_TRUE(b.try_reserve(400));
  EXPECT_FALSE(b.over());
  b.force(10);  // already allocated: counted above the limit
  EXPECT_TRUE(b.over());
  EXPECT_EQ(b.peak(), 1010u);
  b.release(1010);
  EXPECT_EQ(b.used(), 0u);
  EXPECT_EQ(b.peak(), 1010u);
  EXPECT_FALSE(b.try_reserve(1001));
  EXPECT_FALSE(b.try_reserve(~0ull));  // no wrap-around
}

TEST(MemoryBudget, AdjustGrowsAndShrinksACharge) {
  MemoryBudget b(100);
  uint64_t held = 0;
  EXPECT_TRUE(b.adjust(&held, 60, false));
  EXPECT_FALSE(b.adjust(&held, 120, false));
  EXPECT_EQ(held, 60u);
  EXPECT_TRUE(b.adjust(&held, 120, true));
  EXPECT_EQ(b.used(), 120u);
  EXPECT_TRUE(b.adjust(&held, 10, false));
  EXPECT_EQ(b.used(), 10u);
  EXPECT_EQ(held, 10u);
}

TEST(MemoryBudget, NoLimitCountsEverything) {
  MemoryBudget b(0);
  EXPECT_TRUE(b.try_reserve(1ull << 40));
  EXPECT_FALSE(b.over());
  EXPECT_EQ(b.used(), 1ull << 40);
}

TEST(MemoryBudget, ConcurrentReservationsNeverPassTheLimit) {
  MemoryBudget b(10000);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&b] {
      for (int i = 0; i < 20000; ++i) {
        if (b.try_reserve(7)) b.release(7);
        if (b.try_reserve(3000)) b.release(3000);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(b.used(), 0u);
  EXPECT_LE(b.peak(), 10000u);
}

// The estimate grows with what a body makes: the bytes themselves, strings (copied, rendered and
// tokenized), and values (tree nodes, token ids).
TEST(RequestMemoryEstimate, CoversBytesStringsAndValues) {
  const std::string text = R"({"prompt": ")" + std::string(100000, 'a') + R"("})";
  std::string ids = R"({"prompt": [)";
  for (int i = 0; i < 50000; ++i) ids += i ? ",1" : "1";
  ids += "]}";
  const uint64_t e_text = request_memory_estimate(text), e_ids = request_memory_estimate(ids);
  EXPECT_GE(e_text, text.size() + 100000u * 5);  // body, the tree's copy, the prompt, its tokens
  EXPECT_GE(e_ids, ids.size() + 50000u * 48);     // a json node and an int32 per id, vector slack
  // Escapes and structure inside strings are string bytes, not values.
  const uint64_t quoted = request_memory_estimate(R"({"a": "[1,2,{\"x\":3}]"})");
  const uint64_t plain = request_memory_estimate(R"({"a": "abcdefghijklmno"})");
  EXPECT_EQ(quoted, plain);
  EXPECT_LT(request_memory_estimate("{}"), request_memory_estimate(R"({"a": 1})"));
  EXPECT_GE(request_memory_estimate(""), 0u);
}
