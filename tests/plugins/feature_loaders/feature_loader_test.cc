// The feature loaders through the built plugins, against references: a device emulated as a
// map of feature rows, filled only by the loader's copies, must give every batch exactly the
// host's rows (bitwise); the static cache holds the top-degree vertices within its budget (a
// full sort); batch reuse copies the set difference with the previous batch; two-level reuse
// never copies more than one level and keeps no more extra rows than its budget. Then whole
// simulated GNN runs: each loader's copies reach the simulator's PCIe links, reuse copies
// less than plain loading, and bad input is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstring>
#include <set>

#include "experiment_runs.h"
#include "sim/sim_backend.h"
#include "testbed/feature_loader.h"
#include "testbed/model_graph.h"
#include "testbed/train/graph.h"
#include "testbed/train/neighbor_sampler.h"
#include "testbed/train/rng.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

constexpr std::int64_t kDim = 8;

class FeatureLoaders : public testing::ExperimentRuns {
 protected:
  std::shared_ptr<FeatureLoader> Make(const std::string& name, double budget_mib = -1) {
    const ComponentEntry* e = registry_.Find(ComponentKind::kFeatureLoader, name);
    EXPECT_NE(e, nullptr) << name;
    if (e == nullptr) return nullptr;
    ParamSet p;
    for (const ParamSpec& s : e->decl.params) p.Set(s.name(), s.default_value());
    if (budget_mib >= 0) p.Set("budget_mib", budget_mib);
    auto made = registry_.Create<FeatureLoader>(name, p);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : nullptr;
  }

  void SetUp() override {
    ExperimentRuns::SetUp();
    auto g = train::GenerateRmat(2000, 16000, train::RmatOptions{});
    ASSERT_TRUE(g.ok()) << g.status();
    graph_ = std::move(*g);
    for (std::int64_t v = 0; v < graph_.vertices; ++v) degrees_.push_back(graph_.Degree(v));
    train::Rng rng(7);
    features_.resize(static_cast<size_t>(graph_.vertices * kDim));
    for (float& x : features_) x = static_cast<float>(rng.Normal());
    // Twelve sampled batches of 64 seeds, fanouts 5, 3: their input vertices.
    std::vector<std::int64_t> all(static_cast<size_t>(graph_.vertices));
    for (std::int64_t v = 0; v < graph_.vertices; ++v) all[static_cast<size_t>(v)] = v;
    const auto seeds = train::EpochBatches(all, 64, 3, 0);
    for (int b = 0; b < 12; ++b) {
      train::Rng r(100 + b);
      auto s = train::SampleNeighbors(graph_, seeds[static_cast<size_t>(b)], {5, 3}, r);
      ASSERT_TRUE(s.ok()) << s.status();
      batches_.push_back(s->hops.back());
    }
  }

  FeatureGraph Graph() const {
    FeatureGraph fg;
    fg.vertices = graph_.vertices;
    fg.degrees = degrees_;
    fg.row_bytes = kDim * 4;
    fg.threads = 2;
    return fg;
  }

  std::vector<float> HostRows(const std::vector<std::int64_t>& batch) const {
    std::vector<float> out;
    for (std::int64_t v : batch) {
      out.insert(out.end(), features_.begin() + v * kDim, features_.begin() + (v + 1) * kDim);
    }
    return out;
  }

  // Runs `loader` over the batches on an emulated device: rows enter only by its copies and
  // leave when not kept. Returns the copies per call (Begin first).
  std::vector<std::vector<std::int64_t>> Replay(FeatureLoader& loader, std::vector<size_t>* kept_extra = nullptr) {
    std::map<std::int64_t, std::vector<float>> device;
    std::vector<std::vector<std::int64_t>> copies;
    auto apply = [&](const FeatureLoad& load) {
      for (std::int64_t v : load.copied) {
        EXPECT_EQ(device.count(v), 0u) << "vertex " << v << " copied while resident";
        device[v] = std::vector<float>(features_.begin() + v * kDim, features_.begin() + (v + 1) * kDim);
      }
      copies.push_back(load.copied);
    };
    auto begun = loader.Begin(Graph());
    EXPECT_TRUE(begun.ok()) << begun.status();
    if (!begun.ok()) return copies;
    apply(*begun);
    auto keep_only = [&](const std::vector<std::int64_t>& kept) {
      std::set<std::int64_t> k(kept.begin(), kept.end());
      for (auto it = device.begin(); it != device.end();) it = k.count(it->first) ? std::next(it) : device.erase(it);
    };
    keep_only(begun->kept);
    for (const auto& batch : batches_) {
      auto load = loader.Next(batch);
      EXPECT_TRUE(load.ok()) << load.status();
      if (!load.ok()) return copies;
      apply(*load);
      std::vector<float> read;
      for (std::int64_t v : batch) {
        auto it = device.find(v);
        EXPECT_NE(it, device.end()) << "batch vertex " << v << " not on the device";
        if (it == device.end()) return copies;
        read.insert(read.end(), it->second.begin(), it->second.end());
      }
      const std::vector<float> host = HostRows(batch);
      EXPECT_EQ(0, std::memcmp(read.data(), host.data(), host.size() * sizeof(float)));
      if (kept_extra != nullptr) {
        std::set<std::int64_t> in(batch.begin(), batch.end());
        size_t extra = 0;
        for (std::int64_t v : load->kept) extra += in.count(v) ? 0 : 1;
        kept_extra->push_back(extra);
      }
      keep_only(load->kept);
    }
    return copies;
  }

  train::Graph graph_;
  std::vector<std::int64_t> degrees_;
  std::vector<float> features_;
  std::vector<std::vector<std::int64_t>> batches_;
};

TEST_F(FeatureLoaders, EveryLoaderGivesEachBatchTheHostsRowsBitwise) {
  for (const char* name : {"none", "pagraph.static_cache", "brgraph", "brgraph.two_level"}) {
    SCOPED_TRACE(name);
    auto loader = Make(name, std::string(name).find('.') != std::string::npos ? 0.01 : -1);
    ASSERT_NE(loader, nullptr);
    Replay(*loader);
  }
}

TEST_F(FeatureLoaders, PlainLoadingCopiesEveryBatchVertex) {
  auto loader = Make("none");
  ASSERT_NE(loader, nullptr);
  const auto copies = Replay(*loader);
  ASSERT_EQ(copies.size(), batches_.size() + 1);
  EXPECT_TRUE(copies[0].empty());
  for (size_t i = 0; i < batches_.size(); ++i) EXPECT_EQ(copies[i + 1], batches_[i]);
}

TEST_F(FeatureLoaders, StaticCacheHoldsTheTopDegreeVerticesWithinItsBudget) {
  const double budget_mib = 0.01;  // 10485 bytes: 327 rows of 32 bytes
  const auto rows = static_cast<size_t>(budget_mib * 1048576 / (kDim * 4));
  auto loader = Make("pagraph.static_cache", budget_mib);
  ASSERT_NE(loader, nullptr);
  auto begun = loader->Begin(Graph());
  ASSERT_TRUE(begun.ok()) << begun.status();
  std::vector<std::int64_t> order(static_cast<size_t>(graph_.vertices));
  for (std::int64_t v = 0; v < graph_.vertices; ++v) order[static_cast<size_t>(v)] = v;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return degrees_[a] != degrees_[b] ? degrees_[a] > degrees_[b] : a < b;
  });
  order.resize(rows);
  std::sort(order.begin(), order.end());
  std::vector<std::int64_t> cached = begun->kept;
  std::sort(cached.begin(), cached.end());
  EXPECT_EQ(cached, order);
  EXPECT_LE(cached.size() * kDim * 4, budget_mib * 1048576);
  EXPECT_GT((cached.size() + 1) * kDim * 4, budget_mib * 1048576);
  // A batch copies exactly its vertices outside the cache.
  auto load = loader->Next(batches_[0]);
  ASSERT_TRUE(load.ok());
  std::vector<std::int64_t> misses;
  for (std::int64_t v : batches_[0]) {
    if (!std::binary_search(order.begin(), order.end(), v)) misses.push_back(v);
  }
  EXPECT_EQ(load->copied, misses);
}

TEST_F(FeatureLoaders, BatchReuseCopiesWhatThePreviousBatchLacks) {
  auto loader = Make("brgraph");
  ASSERT_NE(loader, nullptr);
  const auto copies = Replay(*loader);
  ASSERT_EQ(copies.size(), batches_.size() + 1);
  EXPECT_EQ(copies[1], batches_[0]);
  size_t reused = 0;
  for (size_t i = 1; i < batches_.size(); ++i) {
    std::set<std::int64_t> prev(batches_[i - 1].begin(), batches_[i - 1].end());
    std::vector<std::int64_t> fresh;
    for (std::int64_t v : batches_[i]) {
      if (!prev.count(v)) fresh.push_back(v);
    }
    EXPECT_EQ(copies[i + 1], fresh) << "batch " << i;
    reused += batches_[i].size() - fresh.size();
  }
  EXPECT_GT(reused, 0u);  // consecutive batches of a power-law graph share vertices
}

TEST_F(FeatureLoaders, TwoLevelReuseNeverCopiesMoreAndKeepsItsBudget) {
  auto one = Make("brgraph");
  const double budget_mib = 0.005;
  const auto budget_rows = static_cast<size_t>(budget_mib * 1048576 / (kDim * 4));
  auto two = Make("brgraph.two_level", budget_mib);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const auto c1 = Replay(*one);
  std::vector<size_t> extra;
  const auto c2 = Replay(*two, &extra);
  ASSERT_EQ(c1.size(), c2.size());
  size_t total1 = 0, total2 = 0;
  for (size_t i = 0; i < c1.size(); ++i) {
    std::set<std::int64_t> s1(c1[i].begin(), c1[i].end());
    for (std::int64_t v : c2[i]) EXPECT_TRUE(s1.count(v)) << "call " << i << " copies " << v;
    total1 += c1[i].size();
    total2 += c2[i].size();
  }
  EXPECT_LT(total2, total1);
  for (size_t e : extra) EXPECT_LE(e, budget_rows);
  EXPECT_EQ(*std::max_element(extra.begin(), extra.end()), budget_rows);
}

// Family gnn: one seed's sampling tree with fanouts 25, 10 (hop 1: 1 + 25 vertices), worked by hand.
TEST(GnnModel, LayersFollowTheSamplingTreeOfOneSeed) {
  ModelShape s;
  s.name = "sage";
  s.family = "gnn";
  s.fanouts = {25, 10};
  s.inputs = 100;
  s.hidden = 64;
  s.vocab = 5;
  auto g = BuildModelGraph(s);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->layers.size(), 2u);
  const Layer& first = g->layers[0];  // updates hop 1 (26 vertices) from hop 2, fanout 10
  EXPECT_EQ(first.gnn_fanout, 10);
  EXPECT_EQ(first.gnn_targets_per_sample, 26);
  EXPECT_EQ(first.fwd_flops_per_sample, 2.0 * 26 * 2 * 100 * 64);
  EXPECT_EQ(first.params, 2 * 100 * 64 + 64);
  EXPECT_EQ(first.output_bytes_per_sample, 4 * 26 * 64);
  const Layer& last = g->layers[1];  // updates the seed from hop 1, fanout 25
  EXPECT_EQ(last.gnn_fanout, 25);
  EXPECT_EQ(last.gnn_targets_per_sample, 1);
  EXPECT_EQ(last.fwd_flops_per_sample, 2.0 * 1 * 2 * 64 * 5);
  EXPECT_EQ(last.bwd_flops_per_sample, 2 * last.fwd_flops_per_sample);
  s.gnn_layer = "gcn";  // x W on every input row first: 26 x 11 rows
  auto gcn = BuildModelGraph(s);
  ASSERT_TRUE(gcn.ok());
  EXPECT_EQ(gcn->layers[0].fwd_flops_per_sample, 2.0 * 26 * 11 * 100 * 64);
  s.fanouts = {25, 0};
  auto bad = BuildModelGraph(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("fanouts[1]"));
}

// Whole simulated runs: GraphSAGE on a generated graph, two replicas on one RTX 3090 node.
std::string GnnExperiment(const std::string& model_extra, const std::string& arms) {
  return R"(
[experiment]
name = "gnn"
backend = "sim"
[cluster]
preset = "rtx3090-64"
nodes = 1
[model]
name = "sage"
family = "gnn"
gnn_layer = "sage"
fanouts = [10, 5]
inputs = 128
hidden = 128
vocab = 16
)" + model_extra + R"(
[train]
micro_batch = 256
micro_batches = 1
precision = "fp32"
steps = 4
[parallel]
dp = 2
)" + arms;
}

TEST_F(FeatureLoaders, SimulatedRunsCopyWhatTheLoadersSay) {
  SimBackend backend;
  const std::string loader = R"(graph = "rmat", vertices = 20000, edges = 200000, threads = 2)";
  auto outs = RunAll(GnnExperiment("", "[[arm]]\nname = \"none\"\nfeature_loader = { use = \"none\", " + loader +
                                           " }\n[[arm]]\nname = \"brgraph\"\nfeature_loader = { use = \"brgraph\", " +
                                           loader + " }\n"),
                     backend);
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  for (const auto& o : outs) {
    // The simulator copies what the loader asked for: bytes per device and iteration.
    EXPECT_NEAR(MetricOf(*o, "host_copy_bytes"), MetricOf(*o, "feature_copy_bytes_per_step"),
                0.25 * MetricOf(*o, "feature_copy_bytes_per_step"));
    EXPECT_GT(MetricOf(*o, "host_copy_time_s"), 0);
    EXPECT_EQ(MetricOf(*o, "graph_generated"), 1);
  }
  EXPECT_EQ(MetricOf(*outs[0], "feature_copy_fraction"), 1.0);
  EXPECT_LT(MetricOf(*outs[1], "feature_copy_bytes_per_step"), MetricOf(*outs[0], "feature_copy_bytes_per_step"));
  EXPECT_LT(MetricOf(*outs[1], "host_copy_time_s"), MetricOf(*outs[0], "host_copy_time_s"));
  EXPECT_LE(MetricOf(*outs[1], "iteration_time_s"), MetricOf(*outs[0], "iteration_time_s"));
}

// The shared budget: floor(fraction x vertices) rows, else floor(MiB / row bytes), capped at the graph.
TEST(FeatureBudget, RowsByFractionOrMiB) {
  FeatureGraph g;
  g.vertices = 1000;
  g.row_bytes = 4096;
  EXPECT_EQ((FeatureBudget{1.0, 0}.Rows(g)), 256);    // 2^20 / 2^12
  EXPECT_EQ((FeatureBudget{1.0, 0.3}.Rows(g)), 300);  // the fraction wins
  EXPECT_EQ((FeatureBudget{0.0, 0.0}.Rows(g)), 0);
  EXPECT_EQ((FeatureBudget{1e6, 0}.Rows(g)), 1000);
  EXPECT_EQ((FeatureBudget{1e6, 1.0}.Rows(g)), 1000);
}

// A loader's rows beyond the batch stay on the device for the run: the simulator's static
// memory of each device grows by them (the batch's own rows are the first layer's input
// activations), and the epoch takes ceil(seeds / samples per iteration) iterations.
TEST_F(FeatureLoaders, SimulatedMemoryHoldsTheRowsAndEpochsCountTheSeeds) {
  SimBackend backend;
  const std::string loader = R"(graph = "rmat", vertices = 20000, edges = 200000, threads = 2)";
  auto outs = RunAll(GnnExperiment("", "[[arm]]\nname = \"bare\"\n[[arm]]\nname = \"none\"\nfeature_loader = { use = \"none\", " +
                                           loader + " }\n[[arm]]\nname = \"cache\"\nfeature_loader = { use = "
                                           "\"pagraph.static_cache\", budget_fraction = 0.1, " + loader + " }\n"),
                     backend);
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(MetricOf(*outs[0], "epoch_time_s"), -1);  // no loader: the epoch is unknown
  const double row = 4 * 128;
  const double cache = 2000 * row;  // 0.1 of 20000 rows
  const auto bare = ColumnOf<double>(*outs[0], "per_device", "static_bytes");
  const auto none = ColumnOf<double>(*outs[1], "per_device", "static_bytes");
  const auto cached = ColumnOf<double>(*outs[2], "per_device", "static_bytes");
  ASSERT_EQ(none.size(), bare.size());
  ASSERT_EQ(cached.size(), bare.size());
  for (size_t d = 0; d < bare.size(); ++d) {
    EXPECT_EQ(none[d], bare[d]) << d;  // plain loading keeps nothing beyond the batch
    // The cache's rows, whole, from the moment Begin fills it.
    EXPECT_EQ(cached[d] - bare[d], cache) << d;
  }
  // The same batches train in both runs, so their peaks differ by the cache.
  EXPECT_DOUBLE_EQ(MetricOf(*outs[2], "memory_peak_bytes") - MetricOf(*outs[1], "memory_peak_bytes"), cache);
  EXPECT_GE(MetricOf(*outs[2], "feature_device_bytes_peak"), cache);
  EXPECT_GT(MetricOf(*outs[2], "feature_device_bytes_peak"), MetricOf(*outs[1], "feature_device_bytes_peak"));
  for (size_t a = 1; a < outs.size(); ++a) {
    SCOPED_TRACE(a);
    // 13200 seeds (0.66 of 20000), 2 replicas x 256 per iteration: 26 iterations.
    EXPECT_EQ(MetricOf(*outs[a], "iterations_per_epoch"), 26);
    EXPECT_DOUBLE_EQ(MetricOf(*outs[a], "epoch_time_s"), 26 * MetricOf(*outs[a], "iteration_time_s"));
  }
}

TEST_F(FeatureLoaders, BadInputIsRefusedByName) {
  SimBackend backend;
  // A fanout of 0.
  const std::string base = GnnExperiment("", "[[arm]]\nname = \"x\"\n");
  auto zero = RunAll(std::string(base).replace(base.find("[10, 5]"), 7, "[10, 0]"), backend);
  ASSERT_EQ(zero.size(), 1u);
  ASSERT_FALSE(zero[0].ok());
  EXPECT_THAT(std::string(zero[0].status().message()), HasSubstr("fanouts"));
  // A graph file with a vertex out of range, named with its line.
  const std::string edges = (dir_.path() / "edges.csv").string();
  testing::WriteFile(dir_.path() / "edges.csv", "0,1\n1,2\n2,99\n");
  auto out_of_range = RunAll(GnnExperiment("", "[[arm]]\nname = \"x\"\nfeature_loader = { use = \"none\", graph = \"" +
                                                   edges + "\", vertices = 10 }\n"),
                             backend);
  ASSERT_EQ(out_of_range.size(), 1u);
  ASSERT_FALSE(out_of_range[0].ok());
  EXPECT_THAT(std::string(out_of_range[0].status().message()), HasSubstr("edges.csv"));
  EXPECT_THAT(std::string(out_of_range[0].status().message()), HasSubstr("edges.csv:3: vertex 99"));
  // A feature loader on a model that is not a GNN.
  auto dense = RunAll(R"(
[experiment]
name = "dense"
backend = "sim"
[cluster]
preset = "rtx3090-64"
nodes = 1
[model]
name = "m"
family = "mlp"
layers = 1
hidden = 64
inputs = 64
vocab = 10
[train]
micro_batch = 8
micro_batches = 1
[feature_loader]
use = "none"
[[arm]]
name = "x"
)", backend);
  ASSERT_EQ(dense.size(), 1u);
  ASSERT_FALSE(dense[0].ok());
  EXPECT_THAT(std::string(dense[0].status().message()), HasSubstr("family \"gnn\""));
}

}  // namespace
}  // namespace testbed
