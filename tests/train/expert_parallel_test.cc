// Expert parallelism (testbed/train/expert_parallel_moe.h) against the single-process MoE
// layer: ranks on threads, each gating its own slice of the tokens, exchange rows through an
// in-memory all-to-all; the outputs and input gradients of every rank's tokens equal the
// single layer's on all the tokens, and the parameter gradients summed over the ranks equal
// its gradients, with the experts on their owners only and with copies of hot experts.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gradient_check.h"
#include "testbed/train/expert_parallel_moe.h"

namespace testbed::train::testing {
namespace {

// An all-to-all over threads: every rank posts its parts, the last one publishes them all.
class Mailbox {
 public:
  explicit Mailbox(int ranks) : ranks_(ranks), slots_(static_cast<size_t>(ranks)) {}

  std::vector<Matrix<double>> Exchange(int rank, const std::vector<Matrix<double>>& send) {
    std::unique_lock<std::mutex> lock(mu_);
    slots_[static_cast<size_t>(rank)] = send;
    const int generation = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      published_ = std::make_shared<std::vector<std::vector<Matrix<double>>>>(slots_);
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    ++exchanges_;
    std::vector<Matrix<double>> recv(static_cast<size_t>(ranks_));
    for (int s = 0; s < ranks_; ++s) recv[static_cast<size_t>(s)] = (*published_)[static_cast<size_t>(s)][static_cast<size_t>(rank)];
    return recv;
  }
  int exchanges() const { return exchanges_; }

 private:
  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0, generation_ = 0, exchanges_ = 0;
  std::vector<std::vector<Matrix<double>>> slots_;
  std::shared_ptr<std::vector<std::vector<Matrix<double>>>> published_;
};

void ExpectNear(const Matrix<double>& a, const Matrix<double>& b, const std::string& what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  if (a.size() == 0) return;
  EXPECT_LE((a - b).cwiseAbs().maxCoeff(), 1e-12 * (1 + b.cwiseAbs().maxCoeff())) << what;
}

struct Case {
  int ranks;
  int experts;
  int top_k;
  bool copies;
};

class ExpertParallel : public ::testing::TestWithParam<Case> {};

TEST_P(ExpertParallel, EqualsTheSingleLayerOnAllTokens) {
  const Case c = GetParam();
  constexpr std::int64_t kPerRank = 7, kDim = 5;
  Rng rng(3);
  MoeConfig config{.dim = kDim, .hidden = 6, .experts = c.experts, .top_k = c.top_k, .capacity_factor = 0};
  MoeLayer<double> full("moe", config, rng, 0.7);
  const std::int64_t n = kPerRank * c.ranks;
  const Matrix<double> x = RandomMatrix(n, kDim, 11);
  const Matrix<double> dy = RandomMatrix(n, kDim, 12);
  MoeLayer<double> single(full);
  LayerCache<double> sc;
  const Matrix<double> y = *single.Forward(x, sc);
  const Matrix<double> dx = *single.Backward(dy, sc);

  ExpertHolders holders;
  for (int e = 0; e < c.experts; ++e) {
    holders.owner.push_back(e % c.ranks);
    holders.copies.emplace_back();
  }
  if (c.copies) {
    holders.copies[0] = {1};                                             // expert 0 (owner 0) also on rank 1
    for (int r = 0; r < c.ranks; r += 2) holders.copies[1].push_back(r);  // expert 1 (owner 1) on the even ranks
  }
  Mailbox box(c.ranks);
  std::vector<std::unique_ptr<ExpertParallelMoe<double>>> layers;
  for (int r = 0; r < c.ranks; ++r) {
    auto l = ExpertParallelMoe<double>::Create(
        full, r, c.ranks, holders,
        [&box, r](const std::vector<Matrix<double>>& send) -> absl::StatusOr<std::vector<Matrix<double>>> {
          return box.Exchange(r, send);
        });
    ASSERT_TRUE(l.ok()) << l.status();
    layers.push_back(std::make_unique<ExpertParallelMoe<double>>(std::move(*l)));
  }
  std::vector<Matrix<double>> ys(static_cast<size_t>(c.ranks)), dxs(static_cast<size_t>(c.ranks));
  std::vector<absl::Status> st(static_cast<size_t>(c.ranks));
  std::vector<std::vector<std::int64_t>> computed(static_cast<size_t>(c.ranks));
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < c.ranks; ++r) {
      threads.emplace_back([&, r] {
        LayerCache<double> cache;
        auto yr = layers[static_cast<size_t>(r)]->Forward(x.middleRows(r * kPerRank, kPerRank), cache);
        if (!yr.ok()) {
          st[static_cast<size_t>(r)] = yr.status();
          return;
        }
        ys[static_cast<size_t>(r)] = *yr;
        computed[static_cast<size_t>(r)] = layers[static_cast<size_t>(r)]->ComputedPerExpert(cache);
        auto dxr = layers[static_cast<size_t>(r)]->Backward(dy.middleRows(r * kPerRank, kPerRank), cache);
        if (!dxr.ok()) {
          st[static_cast<size_t>(r)] = dxr.status();
          return;
        }
        dxs[static_cast<size_t>(r)] = *dxr;
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const auto& s : st) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(box.exchanges(), 4 * c.ranks);  // two exchanges forward, two backward, on every rank
  for (int r = 0; r < c.ranks; ++r) {
    ExpectNear(ys[static_cast<size_t>(r)], y.middleRows(r * kPerRank, kPerRank), "output of rank " + std::to_string(r));
    ExpectNear(dxs[static_cast<size_t>(r)], dx.middleRows(r * kPerRank, kPerRank), "input gradient of rank " + std::to_string(r));
  }
  // Parameter gradients: summed over the ranks, the single layer's.
  const std::vector<Param<double>*> want = single.Params();
  for (size_t i = 0; i < want.size(); ++i) {
    Matrix<double> sum = Matrix<double>::Zero(want[i]->grad.rows(), want[i]->grad.cols());
    for (auto& l : layers) {
      const auto p = l->Params();
      EXPECT_EQ(p[i]->name, want[i]->name);
      sum += p[i]->grad;
    }
    ExpectNear(sum, want[i]->grad, want[i]->name + " gradient");
  }
  // Every token assignment was computed once, by a rank that holds its expert.
  const MoeRouting routing = single.Routing(sc);
  for (int e = 0; e < c.experts; ++e) {
    std::int64_t total = 0;
    for (int r = 0; r < c.ranks; ++r) {
      const std::int64_t k = computed[static_cast<size_t>(r)][static_cast<size_t>(e)];
      if (k > 0) {
        EXPECT_TRUE(layers[static_cast<size_t>(r)]->Holds(e)) << "expert " << e << " on rank " << r;
      }
      total += k;
    }
    EXPECT_EQ(total, routing.tokens_per_expert[static_cast<size_t>(e)]) << "expert " << e;
  }
  if (c.copies) {
    EXPECT_GT(computed[1][0], 0);  // the copy of expert 0 on rank 1 did work
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ExpertParallel,
                         ::testing::Values(Case{2, 2, 1, false}, Case{4, 4, 1, false}, Case{4, 8, 2, false},
                                           Case{3, 5, 2, false}, Case{2, 2, 1, true}, Case{4, 4, 2, true},
                                           Case{4, 8, 1, true}));

TEST(ExpertParallelSettings, CapacityAndHoldersAreChecked) {
  Rng rng(1);
  MoeLayer<double> capped("moe", MoeConfig{.dim = 3, .hidden = 4, .experts = 2, .top_k = 1, .capacity_factor = 1.25}, rng);
  ExpertHolders h{{0, 1}, {{}, {}}};
  EXPECT_NE(ExpertParallelMoe<double>::Create(capped, 0, 2, h, nullptr).status().message().find("dropless"), std::string::npos);
  MoeLayer<double> moe("moe", MoeConfig{.dim = 3, .hidden = 4, .experts = 2, .top_k = 1, .capacity_factor = 0}, rng);
  h.copies[1] = {1};  // its owner
  EXPECT_NE(ExpertParallelMoe<double>::Create(moe, 0, 2, h, nullptr).status().message().find("expert 1 has a copy on rank 1"),
            std::string::npos);
  h = ExpertHolders{{0, 2}, {{}, {}}};
  EXPECT_NE(ExpertParallelMoe<double>::Create(moe, 0, 2, h, nullptr).status().message().find("expert 1 owned by rank 2"),
            std::string::npos);
}

}  // namespace
}  // namespace testbed::train::testing
