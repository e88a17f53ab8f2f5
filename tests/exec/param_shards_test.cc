// ZeRO's parameter shards with each layer cut into pieces (HSDP's split over link classes):
// the pieces tile the flattened layer at the rounded shares, a gather of one piece fills only
// its elements, a reduce-scatter of one piece sums only its gradients into the parts, and the
// parts' squared norms add up to the summed gradient's. Three thread ranks of the local
// communicator.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "comm_loader.h"
#include "exec/param_shards.h"
#include "on_every_rank.h"
#include "testbed/train/linear.h"

namespace testbed::exec {
namespace {

using testing::ConnectedWorld;
using testing::ConnectThreadRanks;
using testing::OnEveryRank;

constexpr int kRanks = 3;
constexpr std::int64_t kIn = 5, kOut = 7, kElements = kIn * kOut + kOut;  // weight then bias

// Element i of the flattened layer: i + 1, so that every element differs.
train::SequentialModel<float> OneLayer() {
  train::Matrix<float> w(kIn, kOut), b(1, kOut);
  for (std::int64_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<float>(i + 1);
  for (std::int64_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(w.size() + i + 1);
  train::SequentialModel<float> m;
  m.Add(std::make_unique<train::Linear<float>>("fc", std::move(w), std::move(b)));
  return m;
}

// The layer's flattened values or gradients.
std::vector<float> Flat(train::SequentialModel<float>& m, bool gradients) {
  std::vector<float> out;
  for (train::Param<float>* p : m.layer(0).Params()) {
    const train::Matrix<float>& x = gradients ? p->grad : p->value;
    out.insert(out.end(), x.data(), x.data() + x.size());
  }
  return out;
}

class PiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = ConnectThreadRanks(TESTBED_LOCAL_PLUGIN, "local", kRanks, {{"timeout_s", 30.0}});
    ASSERT_EQ(world_.ranks.size(), static_cast<size_t>(kRanks));
  }
  ConnectedWorld world_;
};

TEST_F(PiecesTest, EachPieceMovesOnlyItsElements) {
  // 0.3 of 42 elements is 12.6: piece 0 is [0, 13), piece 1 [13, 42).
  const std::vector<std::vector<double>> shares = {{0.3, 0.7}};
  constexpr std::int64_t kCut = 13;
  std::mutex mu;
  std::int64_t held = 0;
  double grad_sq = 0;
  OnEveryRank(world_.ranks, [&](CommGroup& g) {
    const int r = g.rank();
    train::SequentialModel<float> m = OneLayer();
    ParamShards shards;
    shards.Build(m, {0}, kRanks, r, shares);
    ASSERT_TRUE(shards.active());
    const std::vector<train::Param<float>*> parts = shards.Params();
    ASSERT_EQ(parts.size(), 2u);  // one part per piece
    // Poisoned, then piece 0 gathered: its elements are back, piece 1's are not.
    shards.AfterStep();
    ASSERT_TRUE(shards.Gather(g, 0, 0).ok());
    std::vector<float> v = Flat(m, false);
    for (std::int64_t i = 0; i < kElements; ++i) {
      if (i < kCut) {
        EXPECT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i + 1)) << "rank " << r << " element " << i;
      } else {
        EXPECT_TRUE(std::isnan(v[static_cast<size_t>(i)])) << "rank " << r << " element " << i;
      }
    }
    ASSERT_TRUE(shards.Gather(g, 0, 1).ok());
    v = Flat(m, false);
    for (std::int64_t i = 0; i < kElements; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i + 1));
    // Gradient element i on rank r: (r + 1) * (i + 1); summed over the ranks, 6 * (i + 1).
    for (train::Param<float>* p : m.layer(0).Params()) p->grad.setZero();
    std::int64_t at = 0;
    for (train::Param<float>* p : m.layer(0).Params()) {
      for (std::int64_t i = 0; i < p->size(); ++i) p->grad.data()[i] = static_cast<float>((r + 1) * (at + i + 1));
      at += p->size();
    }
    // Piece 1 alone: piece 0's part keeps a zero gradient, and the bytes are piece 1's.
    auto bytes = shards.ReduceScatter(g, 0, 1, 1);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, static_cast<double>((kElements - kCut) * sizeof(float)));
    EXPECT_EQ(parts[0]->grad.squaredNorm(), 0.0f);
    EXPECT_GT(parts[1]->grad.squaredNorm(), 0.0f);
    ASSERT_TRUE(shards.ReduceScatter(g, 0, 1, 0).ok());
    const double mine = shards.GradSq([](const std::string&) { return true; });
    std::lock_guard<std::mutex> lock(mu);
    for (const train::Param<float>* p : parts) held += p->size();
    grad_sq += mine;
  });
  // The parts tile the layer, and their norms add up to the summed gradient's.
  EXPECT_EQ(held, kElements);
  double expect = 0;
  for (std::int64_t i = 0; i < kElements; ++i) expect += 36.0 * static_cast<double>((i + 1) * (i + 1));
  EXPECT_DOUBLE_EQ(grad_sq, expect);
}

TEST_F(PiecesTest, AnEmptyPieceHasNoPartAndItsTasksAreNoOps) {
  OnEveryRank(world_.ranks, [&](CommGroup& g) {
    train::SequentialModel<float> m = OneLayer();
    ParamShards shards;
    shards.Build(m, {0}, kRanks, g.rank(), {{0.0, 1.0}});
    ASSERT_EQ(shards.Params().size(), 1u);
    shards.AfterStep();
    ASSERT_TRUE(shards.Gather(g, 0, 0).ok());  // nothing of piece 0: still poisoned
    EXPECT_TRUE(std::isnan(Flat(m, false)[0]));
    ASSERT_TRUE(shards.Gather(g, 0, 1).ok());
    const std::vector<float> v = Flat(m, false);
    for (std::int64_t i = 0; i < kElements; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i + 1));
  });
}

}  // namespace
}  // namespace testbed::exec
