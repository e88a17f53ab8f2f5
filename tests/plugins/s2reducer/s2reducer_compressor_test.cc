// The `s2reducer` component: payload layout, decoding after an all-reduce of several ranks,
// clear errors for bad input, and a cost that matches the real payload.
#include "s2reducer_compressor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gradients.h"

namespace testbed::s2reducer {
namespace {

using testing::DyadicGradient;
using testing::GradientSpec;

std::unique_ptr<S2ReducerCompressor> Make(S2ReducerParams p) {
  auto made = S2ReducerCompressor::Create(p);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

S2ReducerParams Params(int rows, std::int64_t columns, std::uint64_t seed) {
  S2ReducerParams p;
  p.rows = rows;
  p.columns = columns;
  p.seed = seed;
  return p;
}

TEST(S2ReducerCompressor, PayloadPartsCarryTheirReduceOps) {
  auto c = Make(Params(3, 50, 1));
  const std::vector<float> g = DyadicGradient({1000, 0.05, false}, 1);
  auto p = c->Encode(g, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(c->mergeable());
  ASSERT_EQ(p->parts.size(), 3u);
  EXPECT_EQ(p->parts[0].name, kAgreementPartName);
  EXPECT_EQ(p->parts[0].op, ReduceOp::kBitOr);
  EXPECT_EQ(p->parts[1].type, DataType::kUInt64);
  EXPECT_EQ(p->parts[1].op, ReduceOp::kBitOr);
  EXPECT_EQ(p->parts[1].elements, (1000 + 63) / 64);
  EXPECT_EQ(p->parts[2].type, DataType::kFloat32);
  EXPECT_EQ(p->parts[2].op, ReduceOp::kSum);
  EXPECT_EQ(p->parts[2].elements, 3 * 50);
}

TEST(S2ReducerCompressor, ColumnsFollowTheRatio) {
  S2ReducerParams p = Params(4, 0, 1);
  p.ratio = 10;
  auto c = Make(p);
  // 4000 elements at ratio 10: 400 counters, 100 per row.
  EXPECT_EQ(c->ShapeFor(4000).columns, 100);
  EXPECT_EQ(c->ShapeFor(4001).columns, 101);
  EXPECT_EQ(c->ShapeFor(3).columns, 1);
}

// Decoding the all-reduce of four ranks' payloads (each part combined with its own op) gives
// exactly what decoding one encoding of the summed gradient gives: sketches are linear and
// bitmaps of positive gradients merge by OR into the bitmap of the sum.
TEST(S2ReducerCompressor, DecodingAnAllReduceOfFourRanksEqualsDecodingTheSum) {
  constexpr int kRanks = 4;
  const std::int64_t n = 10007;
  std::vector<std::unique_ptr<S2ReducerCompressor>> ranks;
  std::vector<Payload> payloads;
  std::vector<float> sum(static_cast<std::size_t>(n), 0.0f);
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(Make(Params(5, 400, 77)));
    const std::vector<float> g = DyadicGradient({n, 0.02, true}, 100 + r);
    for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    auto p = ranks.back()->Encode(g, {r, 0});
    ASSERT_TRUE(p.ok()) << p.status();
    payloads.push_back(std::move(*p));
  }
  auto combined = CombinePayloads(payloads);
  ASSERT_TRUE(combined.ok()) << combined.status();

  auto single = Make(Params(5, 400, 77));
  auto p_sum = single->Encode(sum, {});
  ASSERT_TRUE(p_sum.ok());
  std::vector<float> expected(sum.size()), expected_mean(sum.size());
  ASSERT_TRUE(single->Decode({&*p_sum, 1}, {1, false}, expected).ok());
  ASSERT_TRUE(single->Decode({&*p_sum, 1}, {kRanks, true}, expected_mean).ok());

  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> out(sum.size()), mean(sum.size());
    ASSERT_TRUE(ranks[static_cast<std::size_t>(r)]->Decode({&*combined, 1}, {kRanks, false}, out).ok());
    ASSERT_TRUE(ranks[static_cast<std::size_t>(r)]->Decode({&*combined, 1}, {kRanks, true}, mean).ok());
    for (std::size_t i = 0; i < sum.size(); ++i) {
      ASSERT_EQ(out[i], expected[i]) << "rank " << r << " element " << i;
      ASSERT_EQ(mean[i], expected_mean[i]) << "rank " << r << " element " << i;
      // Zero exactly where no rank had a non-zero.
      if (sum[i] == 0.0f) {
        ASSERT_EQ(out[i], 0.0f);
      }
    }
  }
}

TEST(S2ReducerCompressor, GradientOfAnotherSizeIsAnError) {
  auto c = Make(Params(3, 50, 1));
  ASSERT_TRUE(c->Encode(std::vector<float>(1000, 1.0f), {}).ok());
  auto again = c->Encode(std::vector<float>(999, 1.0f), {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("999"), std::string_view::npos) << again.status();

  S2ReducerParams fixed = Params(3, 50, 1);
  fixed.elements = 512;
  auto d = Make(fixed);
  EXPECT_EQ(d->Encode(std::vector<float>(513, 1.0f), {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d->Encode({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> out(100);
  Payload empty;
  EXPECT_EQ(d->Decode({&empty, 1}, {}, out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(S2ReducerCompressor, NonFiniteGradientIsAnError) {
  auto c = Make(Params(3, 50, 1));
  std::vector<float> g(300, 0.0f);
  g[7] = std::numeric_limits<float>::quiet_NaN();
  g[9] = std::numeric_limits<float>::infinity();
  auto p = c->Encode(g, {2, 5});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("2 non-finite"), std::string_view::npos) << p.status();
}

TEST(S2ReducerCompressor, RanksThatDisagreeOnSeedOrShapeAreDetected) {
  const std::vector<float> g = DyadicGradient({2000, 0.05, false}, 3);
  auto decode_pair = [&](S2ReducerParams a, S2ReducerParams b) -> absl::Status {
    auto ca = Make(a), cb = Make(b);
    auto pa = ca->Encode(g, {0, 0});
    auto pb = cb->Encode(g, {1, 0});
    if (!pa.ok()) return pa.status();
    if (!pb.ok()) return pb.status();
    std::vector<Payload> both{std::move(*pa), std::move(*pb)};
    auto combined = CombinePayloads(both);
    if (!combined.ok()) return combined.status();
    std::vector<float> out(g.size());
    return ca->Decode({&*combined, 1}, {2, false}, out);
  };
  const absl::Status seed = decode_pair(Params(3, 40, 1), Params(3, 40, 2));
  EXPECT_EQ(seed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(seed.message().find("'seed'"), std::string_view::npos) << seed;
  // 2 x 60 and 3 x 40 counters: same buffer sizes, so only the agreement part can tell.
  const absl::Status shape = decode_pair(Params(2, 60, 1), Params(3, 40, 1));
  EXPECT_EQ(shape.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(shape.message().find("'rows'"), std::string_view::npos) << shape;
  // Different sizes cannot even be all-reduced.
  EXPECT_EQ(decode_pair(Params(3, 40, 1), Params(3, 41, 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(decode_pair(Params(3, 40, 1), Params(3, 40, 1)).ok());
}

TEST(S2ReducerCompressor, MalformedPayloadsAreRejected) {
  auto c = Make(Params(3, 50, 1));
  const std::vector<float> g = DyadicGradient({1000, 0.05, false}, 1);
  auto p = c->Encode(g, {});
  ASSERT_TRUE(p.ok());
  std::vector<float> out(g.size());
  // Two payloads for a mergeable compressor.
  std::vector<Payload> two{*p, *p};
  EXPECT_EQ(c->Decode(two, {2, false}, out).code(), absl::StatusCode::kInvalidArgument);
  // Wrong output length.
  std::vector<float> short_out(g.size() - 1);
  EXPECT_EQ(c->Decode({&*p, 1}, {1, false}, short_out).code(), absl::StatusCode::kInvalidArgument);
  // A bit past the end of the gradient.
  Payload bad_bits = *p;
  bad_bits.parts[1].view<std::uint64_t>().back() |= 1ull << 63;
  EXPECT_EQ(c->Decode({&bad_bits, 1}, {1, false}, out).code(), absl::StatusCode::kInvalidArgument);
  // A truncated sketch.
  Payload truncated = *p;
  truncated.parts[2] = PayloadPart("sketch", DataType::kFloat32, ReduceOp::kSum, 10);
  EXPECT_EQ(c->Decode({&truncated, 1}, {1, false}, out).code(), absl::StatusCode::kInvalidArgument);
  // Another compressor's payload: the format tag differs.
  Payload foreign = *p;
  foreign.parts[0].view<std::uint64_t>()[0] = PayloadFormatTag("topk/1");
  foreign.parts[0].view<std::uint64_t>()[1] = ~PayloadFormatTag("topk/1");
  const absl::Status s = c->Decode({&foreign, 1}, {1, false}, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("'format'"), std::string_view::npos) << s;
}

TEST(S2ReducerCompressor, CostMatchesTheRealPayload) {
  S2ReducerParams params = Params(3, 0, 1);
  params.ratio = 16;
  auto c = Make(params);
  const std::int64_t n = 1 << 16;
  auto cost = c->Cost({n, 0.01, 8});
  ASSERT_TRUE(cost.ok()) << cost.status();
  auto p = c->Encode(DyadicGradient({n, 0.01, false}, 4), {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(cost->WireBytesPerRank(), p->bytes());
  for (const WireTransfer& t : cost->transfers) EXPECT_EQ(t.op, CollectiveOp::kAllReduce) << t.part;
  // Sketch plus bitmap are far below the dense gradient: 4n / 16 + n / 8 + a header.
  EXPECT_LT(cost->WireBytesPerRank(), 4 * n / 5);
  // Encode reads the whole gradient at least once.
  EXPECT_GE(cost->encode.bytes, 4.0 * n);
  EXPECT_GT(cost->decode.flops, 0);
  // More ranks: more merged positions to decode, same wire bytes.
  auto more = c->Cost({n, 0.01, 64});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->WireBytesPerRank(), cost->WireBytesPerRank());
  EXPECT_GT(more->decode.flops, cost->decode.flops);
  EXPECT_EQ(c->Cost({0, 0.5, 2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Cost({10, 0.0, 2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Cost({10, 0.5, 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(S2ReducerCompressor, BadParametersAreRejected) {
  EXPECT_FALSE(S2ReducerCompressor::Create(Params(0, 10, 1)).ok());
  EXPECT_FALSE(S2ReducerCompressor::Create(Params(kMaxRows + 1, 10, 1)).ok());
  EXPECT_FALSE(S2ReducerCompressor::Create(Params(3, -1, 1)).ok());
  S2ReducerParams p = Params(3, 0, 1);
  p.ratio = 0.5;
  EXPECT_FALSE(S2ReducerCompressor::Create(p).ok());
}

}  // namespace
}  // namespace testbed::s2reducer
