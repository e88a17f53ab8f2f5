// The helpers every compressor shares (testbed/compressor.h): the reference combine of
// payload parts, the agreement part, typed views.
#include "testbed/compressor.h"

#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <vector>

namespace testbed {
namespace {

Payload OnePart(DataType type, ReduceOp op, std::int64_t elements) {
  Payload p;
  p.parts.emplace_back("x", type, op, elements);
  return p;
}

TEST(CombinePayloads, AppliesEachPartsOwnOp) {
  std::vector<Payload> ranks;
  for (std::uint64_t r = 0; r < 3; ++r) {
    Payload p;
    p.parts.emplace_back("bits", DataType::kUInt64, ReduceOp::kBitOr, 2);
    p.parts.emplace_back("sum", DataType::kFloat32, ReduceOp::kSum, 2);
    p.parts.emplace_back("count", DataType::kInt32, ReduceOp::kSum, 1);
    p.parts.emplace_back("max", DataType::kFloat64, ReduceOp::kMax, 1);
    p.parts[0].view<std::uint64_t>()[0] = 1ull << r;
    p.parts[0].view<std::uint64_t>()[1] = 1ull << (63 - r);
    p.parts[1].view<float>()[0] = 0.5f * static_cast<float>(r);
    p.parts[1].view<float>()[1] = -1.0f;
    p.parts[2].view<std::int32_t>()[0] = std::numeric_limits<std::int32_t>::max();
    p.parts[3].view<double>()[0] = r == 1 ? 7.0 : -3.0;
    ranks.push_back(std::move(p));
  }
  auto c = CombinePayloads(ranks);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->parts[0].view<std::uint64_t>()[0], 0b111u);
  EXPECT_EQ(c->parts[0].view<std::uint64_t>()[1], (1ull << 63) | (1ull << 62) | (1ull << 61));
  EXPECT_EQ(c->parts[1].view<float>()[0], 1.5f);
  EXPECT_EQ(c->parts[1].view<float>()[1], -3.0f);
  // Integer sums wrap like two's complement instead of being undefined: 3 * (2^31 - 1) mod 2^32.
  EXPECT_EQ(c->parts[2].view<std::int32_t>()[0], 2147483645);
  EXPECT_EQ(c->parts[3].view<double>()[0], 7.0);
  EXPECT_EQ(c->bytes(), 2 * 8 + 2 * 4 + 4 + 8);
}

TEST(CombinePayloads, RejectsMismatchedOrUndefinedParts) {
  EXPECT_FALSE(CombinePayloads({}).ok());
  std::vector<Payload> sizes{OnePart(DataType::kFloat32, ReduceOp::kSum, 3), OnePart(DataType::kFloat32, ReduceOp::kSum, 4)};
  EXPECT_EQ(CombinePayloads(sizes).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<Payload> ops{OnePart(DataType::kUInt64, ReduceOp::kSum, 3), OnePart(DataType::kUInt64, ReduceOp::kBitOr, 3)};
  EXPECT_EQ(CombinePayloads(ops).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<Payload> or_on_float{OnePart(DataType::kFloat32, ReduceOp::kBitOr, 3),
                                   OnePart(DataType::kFloat32, ReduceOp::kBitOr, 3)};
  EXPECT_EQ(CombinePayloads(or_on_float).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AgreementPart, DetectsTheFieldRanksDisagreeOn) {
  const std::array<AgreementField, 3> mine{{{"format", 42}, {"rows", 3}, {"seed", 9}}};
  const std::array<AgreementField, 3> theirs{{{"format", 42}, {"rows", 3}, {"seed", 10}}};
  Payload a, b;
  a.parts.push_back(MakeAgreementPart(mine));
  b.parts.push_back(MakeAgreementPart(theirs));
  EXPECT_TRUE(CheckAgreementPart(a, mine).ok());
  std::vector<Payload> same{a, a, a};
  auto combined_same = CombinePayloads(same);
  ASSERT_TRUE(combined_same.ok());
  EXPECT_TRUE(CheckAgreementPart(*combined_same, mine).ok());
  std::vector<Payload> differ{a, b};
  auto combined = CombinePayloads(differ);
  ASSERT_TRUE(combined.ok());
  const absl::Status s = CheckAgreementPart(*combined, mine);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("'seed'"), std::string_view::npos) << s;
  // A single payload from a rank configured otherwise.
  const absl::Status t = CheckAgreementPart(b, mine);
  EXPECT_EQ(t.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.message().find("'seed'"), std::string_view::npos) << t;
  // Missing or truncated.
  EXPECT_EQ(CheckAgreementPart(Payload{}, mine).code(), absl::StatusCode::kInvalidArgument);
  const std::array<AgreementField, 2> shorter{{{"format", 42}, {"rows", 3}}};
  EXPECT_EQ(CheckAgreementPart(a, shorter).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PayloadPart, ViewsOfAnotherTypeAreEmpty) {
  PayloadPart p("x", DataType::kFloat32, ReduceOp::kSum, 5);
  EXPECT_EQ(p.view<float>().size(), 5u);
  EXPECT_TRUE(p.view<std::uint32_t>().empty());
  EXPECT_EQ(p.bytes(), 20);
  EXPECT_NE(PayloadFormatTag("s2reducer/1"), PayloadFormatTag("topk/1"));
}

}  // namespace
}  // namespace testbed
