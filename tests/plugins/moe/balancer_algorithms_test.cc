// The load balancers' algorithms against references: routing onto a placement by hand, the
// incremental flow against routing from scratch, FasterMoE's shadowing on hand-worked
// counts, the planners' cost model by hand, Pro-Prophet's greedy and Prophet's search
// against a brute force over every placement of small instances, the synthetic routing's
// invariants, and routing traces (round trip, malformed files named).
#include <gtest/gtest.h>

#include <H5Cpp.h>

#include <cmath>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cost_model.h"
#include "flow_state.h"
#include "search.h"
#include "shadow_policy.h"
#include "testbed/load_balancer.h"
#include "testbed/routing_trace.h"

namespace testbed {
namespace {

using prophet::CostConstants;
using prophet::FlowState;

TEST(RouteTokens, CountsByHandWithACopy) {
  // Three ranks, three experts (expert e owned by rank e); expert 0 also copied on rank 1.
  Routing r{3, 3, {6, 3, 0,   // rank 0: 6 to expert 0, 3 to expert 1
                   4, 2, 2,   // rank 1
                   9, 0, 1}};  // rank 2
  ExpertPlacement p = DefaultPlacement(3, 3);
  p.replicas[0] = {1};
  const TokenFlow f = RouteTokens(r, p, -1);
  // Rank 0 keeps its 6 for expert 0, sends 3 to rank 1. Rank 1 keeps 4 (its copy of 0) and
  // 2 (expert 1), sends 2 to rank 2. Rank 2's 9 for expert 0 split over ranks 0 and 1.
  EXPECT_DOUBLE_EQ(f.At(0, 0), 6);
  EXPECT_DOUBLE_EQ(f.At(0, 1), 3);
  EXPECT_DOUBLE_EQ(f.At(1, 1), 6);
  EXPECT_DOUBLE_EQ(f.At(1, 2), 2);
  EXPECT_DOUBLE_EQ(f.At(2, 0), 4.5);
  EXPECT_DOUBLE_EQ(f.At(2, 1), 4.5);
  EXPECT_DOUBLE_EQ(f.At(2, 2), 1);
  EXPECT_DOUBLE_EQ(f.computed[0], 10.5);
  EXPECT_DOUBLE_EQ(f.computed[1], 13.5);
  EXPECT_DOUBLE_EQ(f.computed[2], 3);
  EXPECT_DOUBLE_EQ(f.Received(1), 7.5);
  EXPECT_DOUBLE_EQ(f.SentAway(2), 9);
  // A capacity of 5 drops rank 0's 1 and rank 2's 4 beyond it.
  EXPECT_DOUBLE_EQ(RouteTokens(r, p, 5).dropped, 1 + 4);
  EXPECT_DOUBLE_EQ(BalanceDegree({10.5, 13.5, 3}), std::sqrt(((1.5 * 1.5) + (4.5 * 4.5) + (6 * 6)) / 3));
}

TEST(RouteTokens, PlacementErrorsNameTheExpertAndRank) {
  ExpertPlacement p = DefaultPlacement(4, 2);
  EXPECT_TRUE(CheckPlacement(p, 4, 2, "x").ok());
  p.replicas[3] = {1};  // its owner
  EXPECT_NE(CheckPlacement(p, 4, 2, "layer 2").message().find("layer 2: expert 3 has a copy on rank 1"), std::string::npos);
  p.replicas[3] = {};
  p.owner[1] = 5;
  EXPECT_NE(CheckPlacement(p, 4, 2, "x").message().find("expert 1 is owned by rank 5"), std::string::npos);
}

Routing RandomRouting(int ranks, int experts, std::uint64_t seed, double skew) {
  MoeRouting m;
  m.skew = skew;
  m.rank_spread = 0.8;
  m.seed = seed;
  return SyntheticRouting(m, 0, 0, ranks, experts, 1024, 1);
}

TEST(FlowState, EqualsRoutingFromScratchAfterEveryChange) {
  const Routing r = RandomRouting(6, 9, 3, 1.2);
  FlowState f(r, DefaultPlacement(9, 6));
  std::mt19937 rng(7);
  for (int step = 0; step < 40; ++step) {
    const int e = static_cast<int>(rng() % 9);
    std::vector<int> copies;
    for (int k = 0; k < 6; ++k) {
      if (k != f.owner(e) && rng() % 2 == 0) copies.push_back(k);
    }
    f.SetCopies(e, copies);
    const TokenFlow ref = RouteTokens(r, f.Placement(), -1);
    double max_msg = 0;
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(f.computed()[static_cast<size_t>(i)], ref.computed[static_cast<size_t>(i)], 1e-9);
      EXPECT_NEAR(f.received()[static_cast<size_t>(i)], ref.Received(i), 1e-9);
      for (int j = 0; j < 6; ++j) max_msg = std::max(max_msg, i == j ? 0.0 : ref.At(i, j));
      for (int x = 0; x < 9; ++x) {
        double want = 0;
        if (f.Holds(i, x)) {
          for (int s = 0; s < 6; ++s) {
            want += s == i ? r.At(s, x) : f.Holds(s, x) ? 0.0 : r.At(s, x) / (1.0 + static_cast<double>(f.copies(x).size()));
          }
        }
        EXPECT_NEAR(f.ComputedFor(i, x), want, 1e-9);
      }
    }
    EXPECT_NEAR(f.MaxMessage(), max_msg, 1e-9);
  }
}

TEST(FasterMoe, ShadowsAsItsFormulaDecidesOnHandWorkedCounts) {
  // d = 2000, alpha = 2, 4 bytes, 50 Gb/s = 6.25e9 B/s, 11.5 TFLOP/s: per token send_feature
  // = 8000 / 6.25e9 = 1.28e-6 s and compute = 4 x 2 x 2000^2 / 11.5e12 s; send_model = 2 x 2
  // x 2000^2 x 4 / 6.25e9 = 1.024e-2 s. Expert totals 10000, 2000, 1500, 500 (two ranks).
  const Routing r{2, 4, {6000, 1000, 800, 200,  //
                         4000, 1000, 700, 300}};
  fastermoe::ShadowConstants k;
  k.d_model = 2000;
  k.alpha = 2;
  const double per_token = 3 * (4 * 2 * 2000.0 * 2000.0 / 11.5e12) + 4 * 1.28e-6;
  const fastermoe::ShadowDecision d = fastermoe::DecideShadows(r, k);
  // None: 10000 tokens x per_token = 0.13468 s. Shadow expert 0: 2000 x per_token + 1.024e-2
  // = 0.03718 s (falls). Also expert 1: 1500 x per_token + 2.048e-2 = 0.04068 s (rises): stop.
  EXPECT_NEAR(d.latency_none_s, 10000 * per_token, 1e-12);
  EXPECT_NEAR(d.latency_s, 2000 * per_token + 1.024e-2, 1e-12);
  EXPECT_EQ(d.shadowed, (std::vector<bool>{true, false, false, false}));
  // A much faster network makes shadowing cheap: experts 0, 1 and 2 (the policy never
  // shadows the last one).
  k.net_gbps = 5000;
  EXPECT_EQ(fastermoe::DecideShadows(r, k).shadowed, (std::vector<bool>{true, true, true, false}));
}

MoeLayerShape Shape(int ranks, int experts) {
  MoeLayerShape s;
  s.experts = experts;
  s.ranks = ranks;
  s.hidden = 1024;
  s.ffn_hidden = 4096;
  s.expert_params = 2 * 1024 * 4096 + 4096 + 1024;
  s.tokens_per_rank = 1024;
  s.expert_flops_per_token = 4.0 * 1024 * 4096;
  s.other_flops_per_token = 8.0 * 1024 * 1024;
  return s;
}

TEST(ProphetCost, MatchesTheFormulaByHand) {
  // Two ranks, two experts: rank 0 sends 100 tokens to expert 1, rank 1 keeps 300 for expert 1
  // and sends 200 to expert 0. Expert 1 copied to rank 0 in the second case.
  const Routing r{2, 2, {50, 100, 200, 300}};
  const MoeLayerShape s = Shape(2, 2);
  CostConstants k;
  const double token_bytes = 1024 * 4.0, flops = 35.7e12;
  FlowState none(r, DefaultPlacement(2, 2));
  const prophet::LayerCost a = prophet::Cost(s, k, none);
  // R = (200, 100), H = (250, 400); largest message 200 x 4 KiB = 800 KiB -> 42 Gb/s.
  EXPECT_DOUBLE_EQ(a.a2a_s, 200 * token_bytes / (42e9 / 8));
  EXPECT_DOUBLE_EQ(a.fec_s, 400 * s.expert_flops_per_token / flops);
  EXPECT_DOUBLE_EQ(a.trans_s, 0);
  EXPECT_DOUBLE_EQ(a.total_s, 4 * a.a2a_s + 3 * a.fec_s);
  ExpertPlacement p = DefaultPlacement(2, 2);
  p.replicas[1] = {0};
  FlowState copied(r, p);
  const prophet::LayerCost b = prophet::Cost(s, k, copied);
  // R = (200, 0), H = (350, 300); one copy of 4 x expert_params bytes over 2 ranks at 15 Gb/s.
  const double trans = 4.0 * static_cast<double>(s.expert_params) / (2 * 15e9 / 8);
  EXPECT_DOUBLE_EQ(b.trans_s, trans);
  EXPECT_DOUBLE_EQ(b.fec_s, 350 * s.expert_flops_per_token / flops);
  EXPECT_DOUBLE_EQ(b.fnec_s, 1024 * s.other_flops_per_token / flops);
  const double hidden_trans = std::max(0.0, trans - b.fec_s - b.fnec_s);
  const double hidden_agg = std::max(0.0, trans - 2 * b.fec_s - 2 * b.fnec_s);
  EXPECT_DOUBLE_EQ(b.total_s, 4 * b.a2a_s + 3 * b.fec_s + hidden_trans + hidden_agg);
  k.scheduler = false;
  EXPECT_DOUBLE_EQ(prophet::Cost(s, k, copied).total_s, 4 * b.a2a_s + 3 * b.fec_s + 2 * trans);
  EXPECT_DOUBLE_EQ(prophet::AllToAllBandwidth(128 * 1024), 6e9 / 8);
  EXPECT_DOUBLE_EQ(prophet::AllToAllBandwidth(200 * 1024), 16e9 / 8);
  EXPECT_DOUBLE_EQ(prophet::AllToAllBandwidth(64 << 20), 100e9 / 8);
}

// The cheapest placement of every expert's copies over every subset of the other ranks.
double BruteForce(const MoeLayerShape& s, const CostConstants& k, const Routing& r) {
  const int D = r.ranks, E = r.experts;
  FlowState f(r, DefaultPlacement(E, D));
  double best = prophet::Cost(s, k, f).total_s;
  const int per = 1 << (D - 1);
  std::vector<int> choice(static_cast<size_t>(E), 0);
  for (;;) {
    int e = 0;
    while (e < E && ++choice[static_cast<size_t>(e)] == per) choice[static_cast<size_t>(e++)] = 0;
    if (e == E) break;
    for (int x = 0; x < E; ++x) {
      std::vector<int> copies;
      int bit = 0;
      for (int rank = 0; rank < D; ++rank) {
        if (rank == f.owner(x)) continue;
        if (choice[static_cast<size_t>(x)] >> bit++ & 1) copies.push_back(rank);
      }
      if (copies != f.copies(x)) f.SetCopies(x, copies);
    }
    best = std::min(best, prophet::Cost(s, k, f).total_s);
  }
  return best;
}

TEST(ProphetSearch, GreedyAgainstBruteForceOnSmallInstances) {
  // Four ranks, four experts (8^4 placements each) of MoE-GPT S's shape (d_model 512, FFN
  // 1024, 1,024 tokens per rank), skewed routings from 12 seeds, at three transfer bandwidths
  // (copies dear to cheap), with and without the scheduler's overlap.
  int improved = 0, could = 0, instances = 0;
  for (const double gbps : {15.0, 50.0, 200.0}) {
    for (const bool scheduler : {true, false}) {
      double worst_gap = 0, mean_gap = 0, worst_prophet = 0;
      for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        const Routing r = RandomRouting(4, 4, seed, 1.5);
        MoeLayerShape s = Shape(4, 4);
        s.hidden = 512;
        s.ffn_hidden = 1024;
        s.expert_params = 2 * 512 * 1024 + 1024 + 512;
        s.expert_flops_per_token = 4.0 * 512 * 1024;
        s.other_flops_per_token = 8.0 * 512 * 512;
        CostConstants k;
        k.trans_gbps = gbps;
        k.scheduler = scheduler;
        const double opt = BruteForce(s, k, r);
        const prophet::SearchResult g = prophet::ProProphetSearch(s, k, r, prophet::GreedyOptions{});
        const prophet::SearchResult p = prophet::ProphetSearch(s, k, r, 16);
        // Never worse than no balancing under its own model, never better than the optimum.
        EXPECT_LE(g.cost.total_s, g.start_cost.total_s);
        EXPECT_LE(p.cost.total_s, p.start_cost.total_s);
        EXPECT_GE(g.cost.total_s, opt * (1 - 1e-12));
        EXPECT_GE(p.cost.total_s, opt * (1 - 1e-12));
        // The placement returned is the one costed.
        EXPECT_NEAR(prophet::Cost(s, k, FlowState(r, g.placement)).total_s, g.cost.total_s, 1e-12);
        const double gap = g.cost.total_s / opt - 1;
        worst_gap = std::max(worst_gap, gap);
        mean_gap += gap / 12;
        worst_prophet = std::max(worst_prophet, p.cost.total_s / opt - 1);
        improved += g.cost.total_s < g.start_cost.total_s ? 1 : 0;
        could += opt < g.start_cost.total_s ? 1 : 0;
        ++instances;
      }
      std::printf("%4.0f Gb/s, scheduler %-5s: gap to the brute-force optimum, Pro-Prophet worst %.3f mean %.3f, "
                  "Prophet worst %.3f\n",
                  gbps, scheduler ? "on" : "off", worst_gap, mean_gap, worst_prophet);
    }
  }
  std::printf("a cheaper placement than none exists in %d of %d instances; Pro-Prophet found one in %d\n", could,
              instances, improved);
  EXPECT_GT(could, 0);  // the comparison is not only between unbalanced placements
  EXPECT_GT(improved, 0);
}

TEST(ProphetSearch, StopsAtOnceOnABalancedRouting) {
  const Routing even{4, 4, std::vector<double>(16, 256)};
  const prophet::SearchResult g = prophet::ProProphetSearch(Shape(4, 4), CostConstants{}, even, prophet::GreedyOptions{});
  EXPECT_EQ(g.steps, 0);
  EXPECT_EQ(g.placement, DefaultPlacement(4, 4));
}

TEST(ProphetSearch, CopiesTheHotExpertToAllButTheLeastDemandingRank) {
  // Every rank sends most of its tokens to expert 0 but rank 3, which sends it none: one copy
  // on ranks 1 and 2 (rank 3 left out, max_excluded = 1) evens the load.
  const Routing r{4, 4, {900, 40, 40, 44,  //
                         900, 40, 40, 44,  //
                         900, 40, 40, 44,  //
                         0, 340, 340, 344}};
  // Transfers counted in full (no overlap), so a copy where no token needs it only costs.
  CostConstants k;
  k.trans_gbps = 1000;
  k.scheduler = false;
  const prophet::SearchResult g = prophet::ProProphetSearch(Shape(4, 4), k, r, prophet::GreedyOptions{});
  ASSERT_GE(g.steps, 1);
  EXPECT_EQ(g.placement.replicas[0], (std::vector<int>{1, 2}));
}

TEST(SyntheticRouting, SumsCapsAndDeterminism) {
  MoeRouting m;
  m.skew = 2.0;
  m.seed = 5;
  for (int k : {1, 2}) {
    const Routing r = SyntheticRouting(m, 3, 7, 8, 16, 4096, k);
    for (int rank = 0; rank < 8; ++rank) {
      double sum = 0;
      for (int e = 0; e < 16; ++e) {
        EXPECT_GE(r.At(rank, e), 0);
        EXPECT_LE(r.At(rank, e), 4096 * (1 + 1e-12));
        sum += r.At(rank, e);
      }
      EXPECT_NEAR(sum, 4096.0 * k, 1e-6);
    }
    EXPECT_EQ(r.tokens, SyntheticRouting(m, 3, 7, 8, 16, 4096, k).tokens);
    EXPECT_NE(r.tokens, SyntheticRouting(m, 4, 7, 8, 16, 4096, k).tokens);  // another layer
  }
  // Drift 0: every iteration routes alike; with drift they move apart.
  m.drift = 0;
  EXPECT_EQ(SyntheticRouting(m, 0, 0, 4, 8, 100, 1).tokens, SyntheticRouting(m, 0, 9, 4, 8, 100, 1).tokens);
  m.drift = 0.3;
  EXPECT_NE(SyntheticRouting(m, 0, 0, 4, 8, 100, 1).tokens, SyntheticRouting(m, 0, 9, 4, 8, 100, 1).tokens);
  // No skew and no rank preference: even.
  m.skew = 0;
  m.rank_spread = 0;
  m.drift = 0;
  for (double t : SyntheticRouting(m, 0, 3, 4, 8, 800, 2).tokens) EXPECT_NEAR(t, 200, 1e-9);
}

class RoutingTraceFile : public ::testing::Test {
 protected:
  std::filesystem::path Path(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / ("routing_trace_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir / name;
  }
  void TearDown() override {
    std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("routing_trace_test_" + std::to_string(::getpid())));
  }
};

TEST_F(RoutingTraceFile, RoundTrip) {
  RoutingTrace t;
  t.iterations = 3;
  t.layers = 2;
  t.ranks = 2;
  t.experts = 4;
  for (int i = 0; i < 48; ++i) t.tokens.push_back(i * 1.5);
  t.model = "moe-gpt-s";
  t.source = "test";
  ASSERT_TRUE(WriteRoutingTrace(Path("t.h5"), t).ok());
  ASSERT_TRUE(WriteRoutingTrace(Path("new/dir/t.h5"), t).ok());  // its directory is made
  auto back = ReadRoutingTrace(Path("new/dir/t.h5"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tokens, t.tokens);
  EXPECT_EQ(back->model, "moe-gpt-s");
  const Routing s = back->Slice(2, 1);
  EXPECT_EQ(s.ranks, 2);
  EXPECT_DOUBLE_EQ(s.At(1, 3), (2 * 16 + 1 * 8 + 1 * 4 + 3) * 1.5);
  t.tokens.pop_back();
  EXPECT_FALSE(WriteRoutingTrace(Path("u.h5"), t).ok());
}

TEST_F(RoutingTraceFile, MalformedFilesAreNamed) {
  auto message = [&](const std::filesystem::path& p) { return std::string(ReadRoutingTrace(p).status().message()); };
  EXPECT_NE(message(Path("missing.h5")).find("no such routing trace file"), std::string::npos);
  { std::ofstream(Path("text.h5")) << "not hdf5\n"; }
  EXPECT_NE(message(Path("text.h5")).find("text.h5: not an HDF5 file"), std::string::npos);
  {
    H5::H5File f(Path("other.h5").string(), H5F_ACC_TRUNC);
    const hsize_t dims[2] = {2, 2};
    f.createDataSet("counts", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims));
  }
  EXPECT_NE(message(Path("other.h5")).find("no dataset \"tokens\""), std::string::npos);
  {
    H5::H5File f(Path("flat.h5").string(), H5F_ACC_TRUNC);
    const hsize_t dims[2] = {2, 2};
    const double v[4] = {1, 2, 3, 4};
    f.createDataSet("tokens", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims)).write(v, H5::PredType::NATIVE_DOUBLE);
  }
  const std::string flat = message(Path("flat.h5"));
  EXPECT_NE(flat.find("dataset \"tokens\": 2 dimensions; expected 4 (iterations, MoE layers, ranks, experts)"),
            std::string::npos) << flat;
  RoutingTrace t;
  t.iterations = t.layers = 1;
  t.ranks = 2;
  t.experts = 2;
  t.tokens = {1, 2, -3, 4};
  ASSERT_TRUE(WriteRoutingTrace(Path("neg.h5"), t).ok());
  const std::string neg = message(Path("neg.h5"));
  EXPECT_NE(neg.find("neg.h5, dataset \"tokens\": tokens[0][0][1][0] = -3; counts must be finite and >= 0"),
            std::string::npos) << neg;
}

}  // namespace
}  // namespace testbed
