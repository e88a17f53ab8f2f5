// Sparse embedding communication on real ranks (exec/sparse_rows.h), four thread ranks of the
// local communicator: the row gradients every rank sends reach exactly the owners of their
// rows, each owner getting every row it owns that some rank touched and no other, summed as
// the dense all-reduce would sum them; lookups return exactly the owners' rows; bad ids are
// refused.
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <set>

#include "comm_loader.h"
#include "exec/sparse_rows.h"
#include "on_every_rank.h"

namespace testbed::exec {
namespace {

using testing::ConnectedWorld;
using testing::ConnectThreadRanks;
using testing::OnEveryRank;

constexpr int kRanks = 4;
constexpr std::int64_t kVocab = 50, kDim = 3;

// Rank r's touched rows (a random subset, some shared with other ranks) and their gradients.
SparseRowBlock Touched(int r) {
  std::mt19937 rng(static_cast<unsigned>(100 + r));
  std::set<std::int64_t> ids;
  for (int k = 0; k < 12; ++k) ids.insert(static_cast<std::int64_t>(rng() % kVocab));
  SparseRowBlock b;
  b.ids.assign(ids.begin(), ids.end());
  b.values.resize(static_cast<Eigen::Index>(b.ids.size()), kDim);
  for (Eigen::Index i = 0; i < b.values.size(); ++i) b.values.data()[i] = static_cast<float>(rng() % 1000) / 100.0f - 5;
  return b;
}

class SparseRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = ConnectThreadRanks(TESTBED_LOCAL_PLUGIN, "local", kRanks, {{"timeout_s", 30.0}});
    ASSERT_EQ(world_.ranks.size(), static_cast<size_t>(kRanks));
  }
  ConnectedWorld world_;
};

TEST_F(SparseRowsTest, OwnersReceiveExactlyTheTouchedRowsTheyOwnSummed) {
  // The reference: every rank's gradients summed into the dense table (the all-reduce).
  train::Matrix<float> dense = train::Matrix<float>::Zero(kVocab, kDim);
  std::set<std::int64_t> touched;
  for (int r = 0; r < kRanks; ++r) {
    const SparseRowBlock b = Touched(r);
    for (size_t k = 0; k < b.ids.size(); ++k) {
      dense.row(b.ids[k]) += b.values.row(static_cast<Eigen::Index>(k));
      touched.insert(b.ids[k]);
    }
  }
  std::mutex mu;
  std::set<std::int64_t> delivered;
  OnEveryRank(world_.ranks, [&](CommGroup& g) {
    auto got = ExchangeRowGradients(g, Touched(g.rank()), kDim);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<std::int64_t> expected;
    for (std::int64_t id : touched) {
      if (RowOwner(id, kRanks) == g.rank()) expected.push_back(id);
    }
    EXPECT_EQ(got->ids, expected) << "rank " << g.rank();
    for (size_t k = 0; k < got->ids.size(); ++k) {
      for (Eigen::Index c = 0; c < kDim; ++c) {
        EXPECT_NEAR(got->values(static_cast<Eigen::Index>(k), c), dense(got->ids[k], c), 1e-5)
            << "row " << got->ids[k];
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (std::int64_t id : got->ids) EXPECT_TRUE(delivered.insert(id).second) << "row " << id << " at two owners";
  });
  EXPECT_EQ(delivered, touched);
}

TEST_F(SparseRowsTest, LookupsReturnTheOwnersRows) {
  // Each rank's copy of the table holds the truth only in the rows it owns (others poisoned).
  OnEveryRank(world_.ranks, [&](CommGroup& g) {
    train::Matrix<float> table(kVocab, kDim);
    for (std::int64_t row = 0; row < kVocab; ++row) {
      for (Eigen::Index c = 0; c < kDim; ++c) {
        table(row, c) = RowOwner(row, kRanks) == g.rank() ? static_cast<float>(row * 10 + c) : -1.0f;
      }
    }
    const SparseRowBlock mine = Touched(g.rank());
    auto rows = LookupRows(g, mine.ids, table);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->rows(), static_cast<Eigen::Index>(mine.ids.size()));
    for (size_t k = 0; k < mine.ids.size(); ++k) {
      for (Eigen::Index c = 0; c < kDim; ++c) {
        EXPECT_EQ((*rows)(static_cast<Eigen::Index>(k), c), static_cast<float>(mine.ids[k] * 10 + c));
      }
    }
  });
}

TEST_F(SparseRowsTest, IdsOutOfOrderAreRefused) {
  OnEveryRank(world_.ranks, [&](CommGroup& g) {
    SparseRowBlock b;
    b.ids = {3, 2};
    b.values = train::Matrix<float>::Zero(2, kDim);
    auto got = ExchangeRowGradients(g, b, kDim);
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("ascending"), std::string::npos) << got.status();
  });
}

}  // namespace
}  // namespace testbed::exec
