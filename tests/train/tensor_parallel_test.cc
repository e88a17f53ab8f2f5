// Tensor-parallel layers equal the unsharded layer: outputs, input gradients and parameter
// gradients (reassembled with Unshard). Column/row-parallel linears and attention shards
// are summed serially here; whole transformer blocks and the tiny GPT run on threads with
// the local communicator doing the all-reduces, as an executor would.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "comm_loader.h"
#include "gradient_check.h"
#include "testbed/train/attention.h"
#include "testbed/train/column_parallel_linear.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/row_parallel_linear.h"
#include "testbed/train/tiny_gpt.h"
#include "testbed/train/transformer_block.h"

namespace testbed::train::testing {
namespace {

constexpr double kTol = 1e-10;

void ExpectMatrixNear(const Matrix<double>& a, const Matrix<double>& b, const std::string& what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  EXPECT_LE((a - b).cwiseAbs().maxCoeff(), kTol * (1 + b.cwiseAbs().maxCoeff())) << what;
}

void ExpectSameParams(const std::vector<Param<double>*>& got, const std::vector<Param<double>*>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]->name, want[i]->name);
    ExpectMatrixNear(got[i]->value, want[i]->value, want[i]->name + " value");
    ExpectMatrixNear(got[i]->grad, want[i]->grad, want[i]->name + " grad");
  }
}

class LinearShards : public ::testing::TestWithParam<int> {};

TEST_P(LinearShards, ColumnParallelEqualsUnsharded) {
  const int tp = GetParam();
  Rng rng(1);
  Linear<double> full("fc", 5, 7, true, rng);  // 7 columns: uneven for tp 2, 3, 4
  const Matrix<double> x = RandomMatrix(4, 5, 2);
  const Matrix<double> dy = RandomMatrix(4, 7, 3);
  LayerCache<double> cache;
  const Matrix<double> y = *full.Forward(x, cache);
  const Matrix<double> dx = *full.Backward(dy, cache);
  std::vector<ColumnParallelLinear<double>> shards;
  for (int r = 0; r < tp; ++r) shards.emplace_back(Linear<double>("fc", full.weight().value, full.bias().value), r, tp);
  Matrix<double> dx_sum = Matrix<double>::Zero(4, 5);
  std::vector<const Matrix<double>*> outputs;
  std::vector<Matrix<double>> ys(static_cast<size_t>(tp));
  for (int r = 0; r < tp; ++r) {
    auto& s = shards[static_cast<size_t>(r)];
    LayerCache<double> c;
    ys[static_cast<size_t>(r)] = *s.Forward(x, c);
    const Matrix<double> dy_slice = dy.middleCols(s.columns().offset, s.columns().count);
    dx_sum += *s.Backward(dy_slice, c);  // partial dx: the all-reduce sums them
  }
  for (const auto& m : ys) outputs.push_back(&m);
  ExpectMatrixNear(ConcatColumns(outputs), y, "output");
  ExpectMatrixNear(dx_sum, dx, "input gradient");
  std::vector<const ColumnParallelLinear<double>*> ptrs;
  for (const auto& s : shards) ptrs.push_back(&s);
  Linear<double> back = ColumnParallelLinear<double>::Unshard(ptrs);
  ExpectSameParams(back.Params(), full.Params());
}

TEST_P(LinearShards, RowParallelEqualsUnsharded) {
  const int tp = GetParam();
  Rng rng(4);
  Linear<double> full("fc", 7, 5, false, rng);
  const Matrix<double> x = RandomMatrix(3, 7, 5);
  const Matrix<double> dy = RandomMatrix(3, 5, 6);
  std::vector<RowParallelLinear<double>> shards;
  for (int r = 0; r < tp; ++r) shards.emplace_back(full, r, tp);  // cut before any gradient exists
  LayerCache<double> cache;
  const Matrix<double> y = *full.Forward(x, cache);
  const Matrix<double> dx = *full.Backward(dy, cache);
  Matrix<double> y_sum = Matrix<double>::Zero(3, 5);
  std::vector<Matrix<double>> dxs;
  for (auto& s : shards) {
    LayerCache<double> c;
    y_sum += *s.Forward(x.middleCols(s.rows().offset, s.rows().count), c);  // partial sums
    dxs.push_back(*s.Backward(dy, c));  // exact slices
  }
  ExpectMatrixNear(y_sum, y, "output");
  std::vector<const Matrix<double>*> parts;
  for (const auto& m : dxs) parts.push_back(&m);
  ExpectMatrixNear(ConcatColumns(parts), dx, "input gradient");
  std::vector<const RowParallelLinear<double>*> ptrs;
  for (const auto& s : shards) ptrs.push_back(&s);
  Linear<double> back = RowParallelLinear<double>::Unshard(ptrs);
  ExpectSameParams(back.Params(), full.Params());
}

TEST_P(LinearShards, AttentionHeadShardsSumToTheFullLayer) {
  const int tp = GetParam();
  Rng rng(7);
  CausalSelfAttention<double> full("attn", 12, 4, 3, rng, 0.3);  // 4 heads: uneven for tp 3
  const Matrix<double> x = RandomMatrix(6, 12, 8);
  const Matrix<double> dy = RandomMatrix(6, 12, 9);
  std::vector<CausalSelfAttention<double>> shards;
  for (int r = 0; r < tp; ++r) shards.push_back(CausalSelfAttention<double>::Shard(full, r, tp));
  LayerCache<double> cache;
  const Matrix<double> y = *full.Forward(x, cache);
  const Matrix<double> dx = *full.Backward(dy, cache);
  Matrix<double> y_sum = Matrix<double>::Zero(6, 12), dx_sum = Matrix<double>::Zero(6, 12);
  for (auto& s : shards) {
    LayerCache<double> c;
    y_sum += *s.Forward(x, c);
    dx_sum += *s.Backward(dy, c);
  }
  ExpectMatrixNear(y_sum, y, "output");
  ExpectMatrixNear(dx_sum, dx, "input gradient");
  std::vector<const CausalSelfAttention<double>*> ptrs;
  for (const auto& s : shards) ptrs.push_back(&s);
  CausalSelfAttention<double> back = CausalSelfAttention<double>::Unshard(ptrs);
  ExpectSameParams(back.Params(), full.Params());
}

INSTANTIATE_TEST_SUITE_P(TpDegrees, LinearShards, ::testing::Values(1, 2, 3, 4));

// Runs fn(rank, group) on one thread per rank of a local world of `tp`.
void OnTensorParallelRanks(int tp, const std::function<void(int, CommGroup&)>& fn) {
  auto loaded = testbed::testing::LoadCommunicator(TESTBED_LOCAL_PLUGIN, "local", {{"timeout_s", 30.0}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto ranks = (*loaded)->comm->Connect(tp);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) threads.emplace_back([&, r] { fn(r, *(*ranks)[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
}

AllReduceFn<double> SumOver(CommGroup& group) {
  return [&group](Matrix<double>& m) {
    return group.AllReduce(m.data(), m.data(), static_cast<std::int64_t>(m.size()), DataType::kFloat64, ReduceOp::kSum);
  };
}

class BlockShards : public ::testing::TestWithParam<int> {};

TEST_P(BlockShards, TransformerBlockOnThreadsEqualsUnsharded) {
  const int tp = GetParam();
  Rng rng(10);
  // 3 heads and an MLP width of 10: neither divides evenly for tp 2 or 4.
  TransformerBlock<double> full("block", 9, 3, 4, 10, rng, 0.3);
  const Matrix<double> x = RandomMatrix(8, 9, 11);
  const Matrix<double> dy = RandomMatrix(8, 9, 12);
  const TransformerBlock<double> fresh = full;  // before any gradient exists
  LayerCache<double> cache;
  const Matrix<double> y = *full.Forward(x, cache);
  const Matrix<double> dx = *full.Backward(dy, cache);
  std::vector<std::unique_ptr<TransformerBlock<double>>> shards(static_cast<size_t>(tp));
  std::vector<Matrix<double>> ys(static_cast<size_t>(tp)), dxs(static_cast<size_t>(tp));
  OnTensorParallelRanks(tp, [&](int r, CommGroup& group) {
    auto& shard = shards[static_cast<size_t>(r)];
    shard = std::make_unique<TransformerBlock<double>>(TransformerBlock<double>::Shard(fresh, r, tp, SumOver(group)));
    LayerCache<double> c;
    auto out = shard->Forward(x, c);
    ASSERT_TRUE(out.ok()) << out.status();
    ys[static_cast<size_t>(r)] = *out;
    auto back = shard->Backward(dy, c);
    ASSERT_TRUE(back.ok()) << back.status();
    dxs[static_cast<size_t>(r)] = *back;
  });
  for (int r = 0; r < tp; ++r) {
    ExpectMatrixNear(ys[static_cast<size_t>(r)], y, "output on rank " + std::to_string(r));
    ExpectMatrixNear(dxs[static_cast<size_t>(r)], dx, "input gradient on rank " + std::to_string(r));
  }
  std::vector<const TransformerBlock<double>*> ptrs;
  for (const auto& s : shards) ptrs.push_back(s.get());
  TransformerBlock<double> back = TransformerBlock<double>::Unshard(ptrs);
  ExpectSameParams(back.Params(), full.Params());
}

TEST_P(BlockShards, TinyGptLossAndGradientsEqualUnsharded) {
  const int tp = GetParam();
  TinyGptConfig config{.vocab = 11, .seq_len = 5, .dim = 8, .heads = 2, .layers = 2, .mlp_hidden = 12, .seed = 3};
  auto model = TinyGpt<double>::Create(config);
  ASSERT_TRUE(model.ok());
  const std::vector<std::int64_t> tokens = {1, 4, 2, 9, 0, 3, 3, 7, 10, 5};
  const std::vector<std::int64_t> targets = {4, 2, 9, 0, 3, 3, 7, 10, 5, 1};
  TinyGpt<double> reference = *model;
  std::vector<LayerCache<double>> caches;
  auto logits = reference.Forward(IdsToColumn<double>(tokens), caches);
  ASSERT_TRUE(logits.ok());
  auto loss = SoftmaxCrossEntropy(*logits, targets);
  ASSERT_TRUE(reference.Backward(loss->dlogits, caches).ok());

  std::vector<double> losses(static_cast<size_t>(tp));
  std::vector<std::vector<Param<double>*>> shard_params(static_cast<size_t>(tp));
  std::vector<std::unique_ptr<TinyGpt<double>>> shards(static_cast<size_t>(tp));
  OnTensorParallelRanks(tp, [&](int r, CommGroup& group) {
    auto shard = model->TensorParallelShard(r, tp, SumOver(group));
    ASSERT_TRUE(shard.ok()) << shard.status();
    shards[static_cast<size_t>(r)] = std::make_unique<TinyGpt<double>>(std::move(*shard));
    TinyGpt<double>& m = *shards[static_cast<size_t>(r)];
    std::vector<LayerCache<double>> c;
    auto out = m.Forward(IdsToColumn<double>(tokens), c);
    ASSERT_TRUE(out.ok()) << out.status();
    auto l = SoftmaxCrossEntropy(*out, targets);
    losses[static_cast<size_t>(r)] = l->loss;
    ASSERT_TRUE(m.Backward(l->dlogits, c).ok());
  });
  for (double l : losses) EXPECT_NEAR(l, loss->loss, 1e-12);
  // Replicated layers (embedding, final norm, head) get the full gradient on every rank.
  for (int i : {0, config.layers + 1, config.layers + 2}) {
    for (int r = 0; r < tp; ++r) {
      ExpectSameParams(shards[static_cast<size_t>(r)]->layer(i).Params(), reference.layer(i).Params());
    }
  }
  for (int b = 1; b <= config.layers; ++b) {
    std::vector<const TransformerBlock<double>*> ptrs;
    for (const auto& s : shards) ptrs.push_back(dynamic_cast<const TransformerBlock<double>*>(&s->layer(b)));
    TransformerBlock<double> back = TransformerBlock<double>::Unshard(ptrs);
    ExpectSameParams(back.Params(), reference.layer(b).Params());
  }
}

INSTANTIATE_TEST_SUITE_P(TpDegrees, BlockShards, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace testbed::train::testing
