// The `casq` component: all-gather decoding, determinism per (seed, rank, step), clear errors
// for bad input, and a cost that matches the real payload.
#include "casq_compressor.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "casq_test_data.h"

namespace testbed::casq {
namespace {

using testing::HeavyTailed;

std::unique_ptr<CasqCompressor> Make(CasqParams p = {}) {
  auto made = CasqCompressor::Create(p);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

// Decoding every rank's payload together equals adding the ranks' individual decodings in
// rank order, bit for bit; the mean is that sum divided by the number of ranks.
TEST(CasqCompressor, DecodingTheAllGatherAddsEveryRanksDecoding) {
  constexpr int kRanks = 4;
  const std::int64_t n = 30011;
  std::vector<Payload> payloads;
  std::vector<float> expected(static_cast<std::size_t>(n), 0.0f);
  std::vector<std::unique_ptr<CasqCompressor>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(Make());
    // Ranks of different densities: some payloads dense, some with a bitmap.
    const std::vector<float> g = HeavyTailed(n, r % 2 == 0 ? 1.0 : 0.04, 70 + static_cast<std::uint64_t>(r));
    auto p = ranks.back()->Encode(g, {r, 3});
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<float> alone(g.size());
    ASSERT_TRUE(Make()->Decode({&*p, 1}, {1, false}, alone).ok());
    for (std::size_t i = 0; i < alone.size(); ++i) expected[i] += alone[i];
    payloads.push_back(std::move(*p));
  }
  EXPECT_FALSE(ranks[0]->mergeable());
  EXPECT_EQ(payloads[0].Find("layout")->view<std::uint64_t>()[0], 0u);  // dense
  EXPECT_EQ(payloads[1].Find("layout")->view<std::uint64_t>()[0], 1u);  // bitmap
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> out(static_cast<std::size_t>(n)), mean(static_cast<std::size_t>(n));
    ASSERT_TRUE(ranks[static_cast<std::size_t>(r)]->Decode(payloads, {kRanks, false}, out).ok());
    ASSERT_TRUE(ranks[static_cast<std::size_t>(r)]->Decode(payloads, {kRanks, true}, mean).ok());
    EXPECT_EQ(out, expected);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(mean[i], expected[i] / 4.0f);
  }
}

TEST(CasqCompressor, RandomnessDependsOnSeedRankAndStepOnly) {
  const std::vector<float> g = HeavyTailed(4000, 1.0, 8);
  auto a = Make()->Encode(g, {1, 5});
  auto b = Make()->Encode(g, {1, 5});
  auto other_rank = Make()->Encode(g, {2, 5});
  auto other_step = Make()->Encode(g, {1, 6});
  ASSERT_TRUE(a.ok() && b.ok() && other_rank.ok() && other_step.ok());
  auto codes = [](const Payload& p) {
    std::span<const std::uint64_t> c = p.Find("codes")->view<std::uint64_t>();
    return std::vector<std::uint64_t>(c.begin(), c.end());
  };
  EXPECT_EQ(codes(*a), codes(*b));
  EXPECT_NE(codes(*a), codes(*other_rank));
  EXPECT_NE(codes(*a), codes(*other_step));
}

TEST(CasqCompressor, BadInputIsAClearError) {
  auto c = Make();
  const std::vector<float> g = HeavyTailed(1000, 0.5, 1);
  auto p = c->Encode(g, {});
  ASSERT_TRUE(p.ok());
  std::vector<float> out(1000);
  EXPECT_EQ(c->Encode(HeavyTailed(1001, 0.5, 1), {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Decode({&*p, 1}, {2, false}, out).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> nan = g;
  nan[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Make()->Encode(nan, {}).status().code(), absl::StatusCode::kInvalidArgument);
  // Ranks configured with other bits or another seed.
  CasqParams three;
  three.bits = 3;
  auto q = Make(three)->Encode(g, {1, 0});
  ASSERT_TRUE(q.ok());
  std::vector<Payload> mixed{*p, *q};
  const absl::Status bits = c->Decode(mixed, {2, false}, out);
  EXPECT_EQ(bits.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bits.message().find("'bits'"), std::string_view::npos) << bits;
  CasqParams seeded;
  seeded.seed = 2;
  auto s = Make(seeded)->Encode(g, {1, 0});
  ASSERT_TRUE(s.ok());
  std::vector<Payload> seeds{*p, *s};
  const absl::Status seed = c->Decode(seeds, {2, false}, out);
  EXPECT_EQ(seed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(seed.message().find("'seed'"), std::string_view::npos) << seed;
  // Malformed payloads.
  auto decode_one = [&](const Payload& bad) { return Make()->Decode({&bad, 1}, {1, false}, out); };
  Payload layout = *p;
  layout.parts[1].view<std::uint64_t>()[0] = 7;
  EXPECT_EQ(decode_one(layout).code(), absl::StatusCode::kInvalidArgument);
  Payload count = *p;
  count.parts[1].view<std::uint64_t>()[1] += 1;
  EXPECT_EQ(decode_one(count).code(), absl::StatusCode::kInvalidArgument);
  Payload codes = *p;
  codes.parts[4] = PayloadPart("codes", DataType::kUInt64, ReduceOp::kBitOr, 1);
  EXPECT_EQ(decode_one(codes).code(), absl::StatusCode::kInvalidArgument);
  Payload level = *p;
  level.parts[2].view<float>()[1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(decode_one(level).code(), absl::StatusCode::kInvalidArgument);
  Payload missing = *p;
  missing.parts.pop_back();
  EXPECT_EQ(decode_one(missing).code(), absl::StatusCode::kInvalidArgument);
  // Bad parameters.
  CasqParams too_many;
  too_many.bits = 2;
  too_many.clusters = 5;
  EXPECT_EQ(CasqCompressor::Create(too_many).status().code(), absl::StatusCode::kInvalidArgument);
  CasqParams wide;
  wide.bits = 9;
  EXPECT_FALSE(CasqCompressor::Create(wide).ok());
}

// A gradient with exactly density * n non-zeros: the cost's wire bytes are the payload's.
TEST(CasqCompressor, CostMatchesTheRealPayload) {
  const std::int64_t n = 64000;
  for (double density : {0.01, 0.2, 1.0}) {
    std::vector<float> g(static_cast<std::size_t>(n), 0.0f);
    const auto nonzeros = static_cast<std::int64_t>(density * static_cast<double>(n));
    for (std::int64_t j = 0; j < nonzeros; ++j) g[static_cast<std::size_t>(j * n / nonzeros)] = 0.001f * static_cast<float>(j % 97 + 1);
    for (int bits : {2, 3}) {
      CasqParams p;
      p.bits = bits;
      auto c = Make(p);
      auto cost = c->Cost({n, density, 8});
      auto payload = c->Encode(g, {});
      ASSERT_TRUE(cost.ok() && payload.ok());
      EXPECT_EQ(cost->WireBytesPerRank(), payload->bytes()) << density << " " << bits;
      for (const WireTransfer& t : cost->transfers) EXPECT_EQ(t.op, CollectiveOp::kAllGather);
      // Never more than the codes of every value plus a small header.
      EXPECT_LE(cost->WireBytesPerRank(), n * bits / 8 + 8 * 64 + 200);
    }
  }
}

}  // namespace
}  // namespace testbed::casq
