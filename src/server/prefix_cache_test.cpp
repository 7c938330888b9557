// PrefixCache: longest usable prefix per slot, no cross-slot hits, LRU eviction under the byte and
// count caps, unusable entries dropped, trie nodes freed.
#include "server/prefix_cache.h"

#include <gtest/gtest.h>

using namespace wgllm;
using namespace wgllm::server;

namespace {
std::unique_ptr<SeqSnapshot> snap() { return std::make_unique<SeqSnapshot>(); }
const auto kAll = [](const SeqSnapshot&) { return true; };
}  // namespace

TEST(PrefixCache, LongestPrefixWithinMaxLen) {
  PrefixCache c(1 << 20, 16);
  auto a = snap(), b = snap();
  const SeqSnapshot *pa = a.get(), *pb = b.get();
  c.insert(0, std::vector<int32_t>{1, 2, 3}, std::move(a), 10);
  c.insert(0, std::vector<int32_t>{1, 2, 3, 4, 5}, std::move(b), 10);
  const std::vector<int32_t> q{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(c.lookup(0, q, q.size(), kAll), pb);
  EXPECT_EQ(c.lookup(0, q, 4, kAll), pa);  // the 5-token entry is longer than allowed
  EXPECT_EQ(c.lookup(0, q, 2, kAll), nullptr);
  EXPECT_EQ(c.lookup(0, std::vector<int32_t>{1, 2, 9, 4, 5}, 5, kAll), nullptr);  // diverges before both
  EXPECT_EQ(c.lookup(0, std::vector<int32_t>{1, 2, 3, 7}, 4, kAll), pa);
  EXPECT_EQ(c.lookup(0, std::vector<int32_t>{}, 0, kAll), nullptr);
}

TEST(PrefixCache, NoHitAcrossSlots) {
  PrefixCache c(1 << 20, 16);
  c.insert(1, std::vector<int32_t>{5, 6, 7}, snap(), 10);
  const std::vector<int32_t> q{5, 6, 7, 8};
  EXPECT_EQ(c.lookup(0, q, 4, kAll), nullptr);
  EXPECT_NE(c.lookup(1, q, 4, kAll), nullptr);
}

TEST(PrefixCache, UnusableEntriesAreDroppedAndShorterOnesReturned) {
  PrefixCache c(1 << 20, 16);
  auto a = snap(), b = snap();
  const SeqSnapshot *pa = a.get(), *pb = b.get();
  c.insert(0, std::vector<int32_t>{1, 2}, std::move(a), 10);
  c.insert(0, std::vector<int32_t>{1, 2, 3, 4}, std::move(b), 10);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.nodes(), 4u);
  const std::vector<int32_t> q{1, 2, 3, 4, 5};
  EXPECT_EQ(c.lookup(0, q, 5, [&](const SeqSnapshot& s) { return &s != pb; }), pa);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.bytes(), 10u);
  EXPECT_EQ(c.nodes(), 2u);  // the path to the dropped entry is freed
  c.prune(0, [](const SeqSnapshot&) { return false; });
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.nodes(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

TEST(PrefixCache, LeastRecentlyUsedEvictedUnderByteCap) {
  PrefixCache c(100, 16);
  c.insert(0, std::vector<int32_t>{1}, snap(), 40);
  c.insert(0, std::vector<int32_t>{2}, snap(), 40);
  ASSERT_NE(c.lookup(0, std::vector<int32_t>{1, 0}, 2, kAll), nullptr);  // {1} is now the most recent
  c.insert(0, std::vector<int32_t>{3}, snap(), 40);                      // 120 > 100: evicts {2}
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.bytes(), 80u);
  EXPECT_EQ(c.evictions(), 1u);
  EXPECT_NE(c.lookup(0, std::vector<int32_t>{1, 0}, 2, kAll), nullptr);
  EXPECT_EQ(c.lookup(0, std::vector<int32_t>{2, 0}, 2, kAll), nullptr);
  EXPECT_NE(c.lookup(0, std::vector<int32_t>{3, 0}, 2, kAll), nullptr);
}

TEST(PrefixCache, CountCapAndReplacement) {
  PrefixCache c(1 << 20, 2);
  c.insert(0, std::vector<int32_t>{1, 2}, snap(), 8);
  c.insert(0, std::vector<int32_t>{1, 2}, snap(), 8);  // same slot and tokens: replaced
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.bytes(), 8u);
  c.insert(1, std::vector<int32_t>{1, 2}, snap(), 8);  // same tokens, other slot: a second entry
  c.insert(0, std::vector<int32_t>{1, 2, 3}, snap(), 8);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.evictions(), 1u);
  EXPECT_EQ(c.lookup(0, std::vector<int32_t>{1, 2, 3, 4}, 4, kAll)->n_past(), 0u);  // default snapshot
  EXPECT_NE(c.lookup(1, std::vector<int32_t>{1, 2, 3}, 3, kAll), nullptr);
}

TEST(PrefixCache, LongPathsTearDownWithoutRecursion) {
  PrefixCache c(1 << 20, 4);
  std::vector<int32_t> t(200000);
  for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t(i % 7);
  c.insert(0, t, snap(), 1);
  EXPECT_EQ(c.nodes(), t.size());
  EXPECT_NE(c.lookup(0, t, t.size(), kAll), nullptr);
}
