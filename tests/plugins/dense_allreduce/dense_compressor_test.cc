// The `none` compressor: decoding the all-reduce is the exact sum (or mean) of the ranks'
// gradients; bad input is a clear error; the cost is the dense gradient.
#include "dense_compressor.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

namespace testbed::dense {
namespace {

std::vector<float> DyadicGradient(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-4095, 4095);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (float& v : g) v = static_cast<float>(q(rng)) / 512.0f;
  return g;
}

std::unique_ptr<DenseCompressor> Make(std::int64_t elements = 0) {
  DenseParams p;
  p.elements = elements;
  auto made = DenseCompressor::Create(p);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

TEST(DenseCompressor, DecodingTheAllReduceIsTheExactSumAndMean) {
  constexpr int kRanks = 4;
  const std::int64_t n = 777;
  std::vector<Payload> payloads;
  std::vector<float> sum(static_cast<std::size_t>(n), 0.0f);
  for (int r = 0; r < kRanks; ++r) {
    const std::vector<float> g = DyadicGradient(n, static_cast<std::uint64_t>(r));
    for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    auto p = Make()->Encode(g, {r, 0});
    ASSERT_TRUE(p.ok()) << p.status();
    payloads.push_back(std::move(*p));
  }
  auto combined = CombinePayloads(payloads);
  ASSERT_TRUE(combined.ok()) << combined.status();
  auto c = Make();
  EXPECT_TRUE(c->mergeable());
  std::vector<float> out(sum.size()), mean(sum.size());
  ASSERT_TRUE(c->Decode({&*combined, 1}, {kRanks, false}, out).ok());
  ASSERT_TRUE(c->Decode({&*combined, 1}, {kRanks, true}, mean).ok());
  EXPECT_EQ(out, sum);
  for (std::size_t i = 0; i < sum.size(); ++i) EXPECT_EQ(mean[i], sum[i] / 4.0f);
}

TEST(DenseCompressor, BadInputIsAClearError) {
  auto c = Make(100);
  EXPECT_EQ(c->Encode(DyadicGradient(99, 1), {}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> g = DyadicGradient(100, 1);
  g[50] = -std::numeric_limits<float>::infinity();
  auto bad = c->Encode(g, {3, 7});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rank 3"), std::string_view::npos) << bad.status();
  auto p = c->Encode(DyadicGradient(100, 2), {});
  ASSERT_TRUE(p.ok());
  std::vector<float> out(100);
  std::vector<Payload> two{*p, *p};
  EXPECT_EQ(c->Decode(two, {2, false}, out).code(), absl::StatusCode::kInvalidArgument);
  // Ranks with gradients of different lengths cannot be all-reduced at all.
  auto other = Make()->Encode(DyadicGradient(101, 1), {});
  ASSERT_TRUE(other.ok());
  std::vector<Payload> mixed{*p, *other};
  EXPECT_EQ(CombinePayloads(mixed).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DenseCompressor, CostIsTheDenseGradient) {
  auto c = Make();
  auto cost = c->Cost({1000, 0.01, 16});
  ASSERT_TRUE(cost.ok());
  auto p = c->Encode(DyadicGradient(1000, 1), {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(cost->WireBytesPerRank(), p->bytes());
  EXPECT_EQ(cost->transfers.back().bytes_per_rank, 4000);
  EXPECT_EQ(cost->transfers.back().op, CollectiveOp::kAllReduce);
}

}  // namespace
}  // namespace testbed::dense
