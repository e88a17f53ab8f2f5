// Graphs and neighbour sampling: the shipped Cora and CiteSeer with their published sizes,
// edge lists from users (with errors at their file and line), R-MAT's determinism and
// skew, and GraphSAGE sampling against the adjacency (every sampled neighbour is one, as
// many as the fanout allows, none twice) and across epochs; sampling on threads gives the
// same batches for any number of threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "testbed/train/graph.h"
#include "testbed/train/neighbor_sampler.h"
#include "testbed/train/parallel_sampler.h"

namespace testbed::train {
namespace {

using ::testing::HasSubstr;

const std::string kGraphs = std::string(TESTBED_DATA_DIR) + "/graphs";

std::string Write(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(Planetoid, CoraAndCiteSeerHaveTheirPublishedSizes) {
  auto cora = LoadPlanetoid(kGraphs + "/cora", "cora");
  ASSERT_TRUE(cora.ok()) << cora.status();
  EXPECT_EQ(cora->graph.vertices, 2708);
  EXPECT_EQ(cora->graph.edges(), 5278);
  EXPECT_EQ(cora->features.rows(), 2708);
  EXPECT_EQ(cora->features.cols(), 1433);
  EXPECT_EQ(cora->classes, 7);
  EXPECT_EQ(cora->train.size(), 140u);
  EXPECT_EQ(cora->validation.size(), 500u);
  EXPECT_EQ(cora->test.size(), 1000u);
  auto citeseer = LoadPlanetoid(kGraphs + "/citeseer", "citeseer");
  ASSERT_TRUE(citeseer.ok()) << citeseer.status();
  EXPECT_EQ(citeseer->graph.vertices, 3327);
  EXPECT_EQ(citeseer->graph.edges(), 4552);
  EXPECT_LE(citeseer->features.cols(), 3703);
  EXPECT_EQ(citeseer->classes, 6);
  EXPECT_EQ(std::count(citeseer->labels.begin(), citeseer->labels.end(), -1), 15);
  // Undirected, sorted, without self-loops.
  for (std::int64_t v = 0; v < cora->graph.vertices; ++v) {
    const auto* first = cora->graph.adjacency.neighbors.data() + cora->graph.adjacency.offsets[static_cast<size_t>(v)];
    const auto* last = first + cora->graph.Degree(v);
    ASSERT_TRUE(std::is_sorted(first, last));
    ASSERT_EQ(std::find(first, last, v), last);
  }
}

TEST(EdgeList, ReadsHeaderCommentsAndGzipAndNamesTheBadLine) {
  auto g = ReadEdgeList(Write("tb_edges.csv", "src,dst\n# a comment\n0,1\n1,2\n2,0\n1,0\n"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->vertices, 3);
  EXPECT_EQ(g->edges(), 3);  // 1,0 is 0,1 again
  EXPECT_EQ(g->Degree(0), 2);
  const std::string bad = Write("tb_bad_edges.csv", "src,dst\n0,1\n1;2\n");
  EXPECT_THAT(std::string(ReadEdgeList(bad).status().message()), HasSubstr(bad + ":3: expected \"src,dst\""));
  const std::string far = Write("tb_far_edges.csv", "0,1\n1,7\n");
  EXPECT_THAT(std::string(ReadEdgeList(far, 5).status().message()), HasSubstr(far + ":2: vertex 7 outside [0, 5)"));
  const std::string neg = Write("tb_neg_edges.csv", "0,-1\n");
  EXPECT_THAT(std::string(ReadEdgeList(neg).status().message()), HasSubstr(neg + ":1: vertex -1 outside"));
  EXPECT_EQ(ReadEdgeList("/nonexistent/edges.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(Planetoid, AFeatureFileThatDoesNotMatchTheVerticesIsNamed) {
  const auto dir = std::filesystem::temp_directory_path() / "tb_planetoid";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "labels.csv.gz") << "node,label,split\n0,0,train\n1,1,test\n2,0,none\n";
  std::ofstream(dir / "edges.csv.gz") << "src,dst\n0,1\n1,2\n";
  std::ofstream(dir / "features.csv.gz") << "node,feature_indices\n0,1 3\n1,2\n";
  EXPECT_THAT(std::string(LoadPlanetoid(dir.string(), "tiny").status().message()),
              HasSubstr("features.csv.gz: 2 rows for the 3 vertices"));
  std::ofstream(dir / "features.csv.gz") << "node,feature_indices\n0,1 3\n1,2\n5,0\n";
  EXPECT_THAT(std::string(LoadPlanetoid(dir.string(), "tiny").status().message()),
              HasSubstr("features.csv.gz:4: vertex 5 outside [0, 3)"));
  std::ofstream(dir / "features.csv.gz") << "node,feature_indices\n0,1 3\n1,2\n2,\n";
  std::ofstream(dir / "edges.csv.gz") << "src,dst\n0,1\n1,9\n";
  EXPECT_THAT(std::string(LoadPlanetoid(dir.string(), "tiny").status().message()),
              HasSubstr("edges.csv.gz:3: vertex 9 outside [0, 3)"));
  std::ofstream(dir / "edges.csv.gz") << "src,dst\n0,1\n1,2\n";
  auto ok = LoadPlanetoid(dir.string(), "tiny");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->features.cols(), 4);
  EXPECT_EQ(ok->features(0, 3), 1.0f);
  EXPECT_EQ(ok->features(2, 0), 0.0f);
  std::filesystem::remove_all(dir);
}

TEST(Rmat, DeterministicBySeedAndSkewed) {
  auto a = GenerateRmat(1 << 14, 16 << 14, RmatOptions{});
  auto b = GenerateRmat(1 << 14, 16 << 14, RmatOptions{});
  RmatOptions other;
  other.seed = 2;
  auto c = GenerateRmat(1 << 14, 16 << 14, other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->adjacency.neighbors, b->adjacency.neighbors);
  EXPECT_NE(a->adjacency.neighbors, c->adjacency.neighbors);
  EXPECT_EQ(a->vertices, 1 << 14);
  EXPECT_LE(a->edges(), 16 << 14);
  EXPECT_GT(a->edges(), 8 << 14);  // duplicates dropped, most edges kept
  std::int64_t max_degree = 0;
  for (std::int64_t v = 0; v < a->vertices; ++v) max_degree = std::max(max_degree, a->Degree(v));
  const double mean = 2.0 * static_cast<double>(a->edges()) / static_cast<double>(a->vertices);
  EXPECT_GT(static_cast<double>(max_degree), 20 * mean);  // a power-law tail, unlike a uniform graph
  EXPECT_FALSE(GenerateRmat(1, 4, RmatOptions{}).ok());
  RmatOptions bad;
  bad.a = 0.9;
  EXPECT_FALSE(GenerateRmat(64, 4, bad).ok());
}

TEST(NeighborSampling, EverySampledNeighbourIsANeighbourAsManyAsTheFanoutAllows) {
  auto g = GenerateRmat(4096, 40000, RmatOptions{});
  ASSERT_TRUE(g.ok());
  const std::vector<std::int64_t> seeds = {0, 5, 17, 99, 1000, 4095};
  const std::vector<int> fanouts = {25, 10};
  Rng rng(7), again(7);
  auto batch = SampleNeighbors(*g, seeds, fanouts, rng);
  auto same = SampleNeighbors(*g, seeds, fanouts, again);
  ASSERT_TRUE(batch.ok() && same.ok());
  EXPECT_EQ(batch->hops, same->hops);
  ASSERT_EQ(batch->hops.size(), 3u);
  ASSERT_EQ(batch->blocks.size(), 2u);
  EXPECT_EQ(batch->hops[0], seeds);
  std::int64_t edges = 0;
  for (size_t k = 0; k < 2; ++k) {
    const auto& targets = batch->hops[k];
    const auto& rows = batch->hops[k + 1];
    ASSERT_TRUE(std::equal(targets.begin(), targets.end(), rows.begin()));  // targets first
    EXPECT_EQ(std::set<std::int64_t>(rows.begin(), rows.end()).size(), rows.size());  // no vertex twice
    const Csr& block = batch->blocks[k];
    ASSERT_EQ(block.targets(), static_cast<std::int64_t>(targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) {
      const std::int64_t t = targets[i];
      const auto* adj = g->adjacency.neighbors.data() + g->adjacency.offsets[static_cast<size_t>(t)];
      const std::set<std::int64_t> truth(adj, adj + g->Degree(t));
      std::set<std::int64_t> got;
      for (std::int64_t j = block.offsets[i]; j < block.offsets[i + 1]; ++j) {
        const std::int64_t u = rows[static_cast<size_t>(block.neighbors[static_cast<size_t>(j)])];
        EXPECT_TRUE(truth.count(u)) << u << " is not a neighbour of " << t;
        got.insert(u);
      }
      EXPECT_EQ(static_cast<std::int64_t>(got.size()), block.offsets[i + 1] - block.offsets[i]);  // none twice
      EXPECT_EQ(static_cast<std::int64_t>(got.size()), std::min<std::int64_t>(fanouts[k], g->Degree(t)));
      edges += static_cast<std::int64_t>(got.size());
    }
  }
  EXPECT_EQ(batch->SampledEdges(), edges);
  Rng r(1);
  EXPECT_THAT(std::string(SampleNeighbors(*g, seeds, {25, 0}, r).status().message()),
              HasSubstr("fanout[1] = 0; each fanout must be >= 1"));
  EXPECT_FALSE(SampleNeighbors(*g, std::vector<std::int64_t>{4096}, fanouts, r).ok());
}

TEST(NeighborSampling, EpochBatchesCoverEveryVertexOnceAndShuffleByEpoch) {
  std::vector<std::int64_t> train(103);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<std::int64_t>(3 * i);
  const auto e0 = EpochBatches(train, 10, 5, 0), e1 = EpochBatches(train, 10, 5, 1);
  ASSERT_EQ(e0.size(), 11u);
  EXPECT_EQ(e0.back().size(), 3u);
  std::vector<std::int64_t> all;
  for (const auto& b : e0) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, train);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, EpochBatches(train, 10, 5, 0));
}

TEST(NeighborSampling, ThreadsGiveTheSameBatchesAsOneThread) {
  auto g = GenerateRmat(1 << 12, 40000, RmatOptions{});
  ASSERT_TRUE(g.ok());
  std::vector<std::int64_t> all(1 << 12);
  for (size_t v = 0; v < all.size(); ++v) all[v] = static_cast<std::int64_t>(v);
  const auto batches = EpochBatches(all, 100, 3, 2);  // 41 batches, the last of 96
  SamplingOptions o{{25, 10}, 3, 2, 1};
  auto one = SampleBatches(*g, batches, o);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), batches.size());
  // Each batch is SampleNeighbors with its own seed.
  for (size_t b : {size_t{0}, size_t{7}, batches.size() - 1}) {
    Rng rng(BatchSeed(3, 2, static_cast<std::int64_t>(b)));
    auto alone = SampleNeighbors(*g, batches[b], o.fanouts, rng);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*one)[b].hops, alone->hops) << "batch " << b;
  }
  EXPECT_NE((*one)[0].hops[2], (*one)[1].hops[2]);
  for (int threads : {2, 3, 8, 64}) {
    o.threads = threads;
    auto many = SampleBatches(*g, batches, o);
    ASSERT_TRUE(many.ok()) << many.status();
    ASSERT_EQ(many->size(), one->size());
    for (size_t b = 0; b < one->size(); ++b) {
      ASSERT_EQ((*many)[b].hops, (*one)[b].hops) << threads << " threads, batch " << b;
      for (size_t k = 0; k < (*one)[b].blocks.size(); ++k) {
        EXPECT_EQ((*many)[b].blocks[k].offsets, (*one)[b].blocks[k].offsets);
        EXPECT_EQ((*many)[b].blocks[k].neighbors, (*one)[b].blocks[k].neighbors);
      }
    }
  }
  // Another epoch, other batches.
  o.epoch = 3;
  auto other = SampleBatches(*g, batches, o);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)[0].hops[2], (*one)[0].hops[2]);
}

TEST(NeighborSampling, ThreadedErrorsNameTheFirstBadBatchWhateverTheThreads) {
  auto g = GenerateRmat(256, 2000, RmatOptions{});
  ASSERT_TRUE(g.ok());
  std::vector<std::vector<std::int64_t>> batches = {{0, 1}, {2, 3}, {4, 256}, {5, 999}};
  for (int threads : {1, 4}) {
    auto r = SampleBatches(*g, batches, SamplingOptions{{5}, 1, 0, threads});
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("batch 2: ")) << threads;
  }
  auto none = SampleBatches(*g, batches, SamplingOptions{{5}, 1, 0, 0});
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("sampling threads = 0"));
  auto empty = SampleBatches(*g, {}, SamplingOptions{{5}, 1, 0, 4});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace testbed::train
