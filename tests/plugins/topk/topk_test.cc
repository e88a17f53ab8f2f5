// Top-k selection and the `topk` component: the selected set against a brute-force reference,
// exact error-feedback accounting, all-gather decoding, clear errors, and the cost.
#include "magnitude_key.h"
#include "topk_compressor.h"
#include "topk_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace testbed::topk {
namespace {

// Multiples of 2^-8 in (-16, 16): every sum below is exact, and magnitudes repeat often, so
// ties at the threshold are common.
std::vector<float> DyadicGradient(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-4095, 4095);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (float& v : g) v = static_cast<float>(q(rng)) / 256.0f;
  return g;
}

// The reference: sort by magnitude descending, then index ascending; take the first k.
std::vector<std::uint32_t> BruteForceTopK(const std::vector<float>& v, std::int64_t k) {
  std::vector<std::uint32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return std::abs(v[a]) > std::abs(v[b]); });
  order.resize(static_cast<std::size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

std::unique_ptr<TopKCompressor> Make(TopKParams p) {
  auto made = TopKCompressor::Create(p);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

TopKParams WithK(std::int64_t k, bool feedback = true) {
  TopKParams p;
  p.k = k;
  p.error_feedback = feedback;
  return p;
}

TEST(TopKSelect, MatchesBruteForceIncludingTies) {
  for (std::uint64_t trial = 0; trial < 30; ++trial) {
    const std::int64_t n = 1000 + 37 * static_cast<std::int64_t>(trial);
    const std::int64_t k = 1 + static_cast<std::int64_t>(trial * 31 % 400);
    const std::vector<float> g = DyadicGradient(n, trial);
    std::vector<std::uint32_t> idx(static_cast<std::size_t>(k));
    std::vector<float> val(static_cast<std::size_t>(k));
    ASSERT_EQ(SelectTopK(g, {}, k, idx, val), 0);
    EXPECT_EQ(idx, BruteForceTopK(g, k)) << "trial " << trial;
    for (std::size_t j = 0; j < idx.size(); ++j) EXPECT_EQ(val[j], g[idx[j]]);
  }
}

TEST(TopKSelect, TiesGoToTheLowestIndices) {
  const std::vector<float> g = {0.5f, -1.0f, 1.0f, 0.25f, -1.0f, 1.0f, 2.0f};
  std::vector<std::uint32_t> idx(3);
  std::vector<float> val(3);
  ASSERT_EQ(SelectTopK(g, {}, 3, idx, val), 0);
  EXPECT_EQ(idx, (std::vector<std::uint32_t>{1, 2, 6}));
  EXPECT_EQ(val, (std::vector<float>{-1.0f, 1.0f, 2.0f}));
  // k = n selects everything; k = 1 the single largest.
  std::vector<std::uint32_t> all(g.size());
  std::vector<float> all_values(g.size());
  ASSERT_EQ(SelectTopK(g, {}, static_cast<std::int64_t>(g.size()), all, all_values), 0);
  EXPECT_EQ(all_values, g);
}

TEST(TopKSelect, ThresholdIsTheKthLargestMagnitude) {
  const std::vector<float> g = DyadicGradient(5000, 77);
  std::vector<float> mags(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) mags[i] = std::abs(g[i]);
  std::sort(mags.begin(), mags.end(), std::greater<>());
  for (std::int64_t k : {1, 2, 50, 4999, 5000}) {
    const Threshold t = FindThreshold(g, k);
    EXPECT_EQ(t.key, MagnitudeKey(mags[static_cast<std::size_t>(k - 1)])) << k;
    EXPECT_EQ(t.greater + t.equal_needed, k);
  }
}

// Every value a rank ever got is either sent exactly once or still in its residual:
// sum of sent values + residual == sum of gradients, element by element, exactly.
TEST(TopKCompressor, ErrorFeedbackAccumulatesTheResidualExactly) {
  const std::int64_t n = 3000;
  auto c = Make(WithK(40));
  std::vector<float> accumulated(static_cast<std::size_t>(n), 0.0f);  // per element, since last sent
  std::vector<float> total_in(static_cast<std::size_t>(n), 0.0f), total_sent(static_cast<std::size_t>(n), 0.0f);
  for (int step = 0; step < 25; ++step) {
    const std::vector<float> g = DyadicGradient(n, 1000 + static_cast<std::uint64_t>(step));
    for (std::size_t i = 0; i < g.size(); ++i) {
      accumulated[i] += g[i];
      total_in[i] += g[i];
    }
    auto p = c->Encode(g, {0, step});
    ASSERT_TRUE(p.ok()) << p.status();
    std::span<const std::uint32_t> idx = p->Find("indices")->view<std::uint32_t>();
    std::span<const float> val = p->Find("values")->view<float>();
    // What is sent is the top-k of the corrected gradient (gradient + residual).
    EXPECT_EQ(std::vector<std::uint32_t>(idx.begin(), idx.end()), BruteForceTopK(accumulated, 40)) << "step " << step;
    for (std::size_t j = 0; j < idx.size(); ++j) {
      EXPECT_EQ(val[j], accumulated[idx[j]]);
      total_sent[idx[j]] += val[j];
      accumulated[idx[j]] = 0.0f;
    }
    ASSERT_EQ(std::vector<float>(c->residual().begin(), c->residual().end()), accumulated) << "step " << step;
  }
  for (std::size_t i = 0; i < total_in.size(); ++i) ASSERT_EQ(total_sent[i] + c->residual()[i], total_in[i]) << i;
}

TEST(TopKCompressor, WithoutErrorFeedbackNothingIsKept) {
  auto c = Make(WithK(10, false));
  const std::vector<float> g = DyadicGradient(500, 3);
  auto p = c->Encode(g, {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(c->residual().empty());
  std::span<const std::uint32_t> idx = p->Find("indices")->view<std::uint32_t>();
  EXPECT_EQ(std::vector<std::uint32_t>(idx.begin(), idx.end()), BruteForceTopK(g, 10));
}

TEST(TopKCompressor, DecodingTheAllGatherAddsEveryRanksPairs) {
  constexpr int kRanks = 4;
  const std::int64_t n = 2048;
  std::vector<Payload> payloads;
  std::vector<float> expected(static_cast<std::size_t>(n), 0.0f);
  std::vector<std::unique_ptr<TopKCompressor>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    TopKParams p;
    p.ratio = 0.05;  // k = ceil(0.05 * 2048) = 103
    ranks.push_back(Make(p));
    const std::vector<float> g = DyadicGradient(n, 50 + static_cast<std::uint64_t>(r));
    for (std::uint32_t i : BruteForceTopK(g, 103)) expected[i] += g[i];
    auto pl = ranks.back()->Encode(g, {r, 0});
    ASSERT_TRUE(pl.ok()) << pl.status();
    EXPECT_EQ(pl->Find("indices")->elements, 103);
    payloads.push_back(std::move(*pl));
  }
  EXPECT_FALSE(ranks[0]->mergeable());
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> out(static_cast<std::size_t>(n), 123.0f), mean(static_cast<std::size_t>(n));
    ASSERT_TRUE(ranks[static_cast<std::size_t>(r)]->Decode(payloads, {kRanks, false}, out).ok());
    ASSERT_TRUE(ranks[static_cast<std::size_t>(r)]->Decode(payloads, {kRanks, true}, mean).ok());
    EXPECT_EQ(out, expected);
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(mean[i], expected[i] / 4.0f);
  }
}

TEST(TopKCompressor, BadInputIsAClearError) {
  auto c = Make(WithK(5));
  const std::vector<float> g = DyadicGradient(100, 1);
  auto p = c->Encode(g, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(c->Encode(DyadicGradient(101, 1), {}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> out(100);
  // One payload per rank is required.
  EXPECT_EQ(c->Decode({&*p, 1}, {2, false}, out).code(), absl::StatusCode::kInvalidArgument);
  // Indices out of order or out of range.
  Payload unordered = *p;
  std::span<std::uint32_t> idx = unordered.parts[1].view<std::uint32_t>();
  std::swap(idx[0], idx[1]);
  EXPECT_EQ(c->Decode({&unordered, 1}, {1, false}, out).code(), absl::StatusCode::kInvalidArgument);
  Payload outside = *p;
  outside.parts[1].view<std::uint32_t>()[4] = 100;
  const absl::Status s = c->Decode({&outside, 1}, {1, false}, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("100"), std::string_view::npos) << s;
  // A rank configured with another k.
  auto other = Make(WithK(6));
  auto q = other->Encode(g, {1, 0});
  ASSERT_TRUE(q.ok());
  std::vector<Payload> mixed{*p, *q};
  const absl::Status k = c->Decode(mixed, {2, false}, out);
  EXPECT_EQ(k.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(k.message().find("'k'"), std::string_view::npos) << k;
  // Non-finite values.
  auto d = Make(WithK(5));
  std::vector<float> nan = g;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(d->Encode(nan, {}).status().code(), absl::StatusCode::kInvalidArgument);
  // k larger than the gradient.
  auto big = Make(WithK(500));
  EXPECT_EQ(big->Encode(g, {}).status().code(), absl::StatusCode::kInvalidArgument);
  // Bad parameters.
  TopKParams bad;
  bad.ratio = 0;
  EXPECT_FALSE(TopKCompressor::Create(bad).ok());
}

TEST(TopKCompressor, CostMatchesTheRealPayload) {
  TopKParams p;
  p.ratio = 0.01;
  auto c = Make(p);
  const std::int64_t n = 100000;
  auto cost = c->Cost({n, 1.0, 8});
  ASSERT_TRUE(cost.ok());
  auto pl = c->Encode(DyadicGradient(n, 9), {});
  ASSERT_TRUE(pl.ok());
  EXPECT_EQ(cost->WireBytesPerRank(), pl->bytes());
  for (const WireTransfer& t : cost->transfers) {
    EXPECT_EQ(t.op, CollectiveOp::kAllGather) << t.part;
    EXPECT_EQ(t.CollectiveBytes(8), 8 * t.bytes_per_rank);
  }
  // Decoding grows with the group (every rank's pairs are added), the wire per rank does not.
  auto more = c->Cost({n, 1.0, 64});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->WireBytesPerRank(), cost->WireBytesPerRank());
  EXPECT_GT(more->decode.bytes, cost->decode.bytes);
}

}  // namespace
}  // namespace testbed::topk
