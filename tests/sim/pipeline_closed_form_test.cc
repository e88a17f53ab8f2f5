// Pipeline schedules against their closed forms (equal stage times, free communication):
// 1F1B and GPipe take (m + p - 1)(f + b) with bubble (p - 1)/(m + p - 1); interleaving over
// v chunks divides the bubble time by v; a 1F1B stage s holds p - s micro-batches at once,
// a GPipe stage all m.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kLayer = 1e-3;  // forward time of one attention or MLP layer

struct Outcome {
  SimResult result;
  Plan plan;
};

Outcome SimulateProgram(const ModelGraph& model, const Plan& plan, const PipelineProgram& program, const Cluster& cluster,
            bool free_comm = true, ExpandOptions expand = {}) {
  TrainSettings train;
  ConstantDeviceModel dm(kLayer);
  collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  expand.optimizer_step = true;
  auto schedule = ExpandPipeline(ctx, program, expand);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_TRUE(schedule->Check().ok()) << schedule->Check();
  SimOptions opt;
  opt.free_communication = free_comm;
  SimInputs in{model, cluster, dm, ring};
  auto r = Simulate(*schedule, in, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  return {*r, plan};
}

double Bubble(const SimResult& r, int devices) {
  double idle = 0;
  for (int d = 0; d < devices; ++d) idle += r.devices[static_cast<size_t>(d)].idle_s;
  return idle / devices / r.iteration_time_s;
}

TEST(PipelineClosedForm, OneFOneBTakesMPlusPMinusOneSlots) {
  for (auto [p, m] : {std::pair{4, 8}, {2, 2}, {8, 16}, {4, 4}, {3, 10}}) {
    const ModelGraph model = Gpt(2 * p);
    const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
    const Cluster cluster = StarCluster(p, 1e10, 1e-6);
    const double f = 2 * 2 * kLayer, b = 2 * f;  // two blocks of two layers per stage
    const Outcome o = SimulateProgram(model, plan, OneFOneBProgram(p, m), cluster);
    EXPECT_NEAR(o.result.iteration_time_s, (m + p - 1) * (f + b), 1e-12) << "p=" << p << " m=" << m;
    EXPECT_NEAR(Bubble(o.result, p), static_cast<double>(p - 1) / (m + p - 1), 1e-9);
  }
}

TEST(PipelineClosedForm, GPipeTakesTheSameTimeAndHoldsEveryMicroBatch) {
  const int p = 4, m = 6;
  const ModelGraph model = Gpt(2 * p);
  const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
  const Cluster cluster = StarCluster(p, 1e10, 1e-6);
  const double f = 4 * kLayer, b = 2 * f;
  const Outcome o = SimulateProgram(model, plan, GPipeProgram(p, m), cluster);
  EXPECT_NEAR(o.result.iteration_time_s, (m + p - 1) * (f + b), 1e-12);
  for (int s = 0; s < p; ++s) EXPECT_EQ(o.result.devices[static_cast<size_t>(s)].max_micro_batches_held, m);
}

TEST(PipelineClosedForm, OneFOneBStageHoldsPMinusSMicroBatches) {
  const int p = 6, m = 12;
  const ModelGraph model = Gpt(p);
  const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
  const Outcome o = SimulateProgram(model, plan, OneFOneBProgram(p, m), StarCluster(p, 1e10, 1e-6));
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(o.result.devices[static_cast<size_t>(s)].max_micro_batches_held, p - s) << "stage " << s;
  }
}

TEST(PipelineClosedForm, InterleavingDividesTheBubbleByV) {
  const int p = 4, m = 8;
  for (int v : {2, 4}) {
    const ModelGraph model = Gpt(2 * p * v);
    const Plan plan = UniformPlan(model, 1, p, 1, v, m);
    const double f = v * 2 * 2 * kLayer, b = 2 * f;  // per stage, all chunks
    auto program = InterleavedProgram(p, v, m);
    ASSERT_TRUE(program.ok()) << program.status();
    const Outcome o = SimulateProgram(model, plan, *program, StarCluster(p, 1e10, 1e-6));
    // Narayanan et al. 2021: bubble time (p - 1)(f + b) / v.
    EXPECT_NEAR(o.result.iteration_time_s, m * (f + b) + (p - 1) * (f + b) / v, 1e-12) << "v=" << v;
  }
}

// Megatron-Core's schedule table in groups (microbatch_group_size_per_vp_stage): the example
// its source documents (PP 2, groups of 3, 5 micro-batches, 2 chunks), and the counts it
// refuses, by name.
TEST(PipelineClosedForm, InterleavedTableInGroupsIsMegatronCores) {
  auto program = InterleavedProgram(2, 2, 5, 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE(program->p2p_by_direction);
  // Stage 1 warms up with (2 - 1 - 1) x 2 + (2 - 1) x 3 = 3 forwards, then alternates.
  std::vector<std::pair<int, int>> forwards, backwards;  // (micro-batch, chunk)
  for (const PipelineOp& op : program->stages[1]) {
    (op.kind == PipelineOp::Kind::kForward ? forwards : backwards).emplace_back(op.micro_batch, op.chunk);
  }
  const std::vector<std::pair<int, int>> table = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1},
                                                  {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
  EXPECT_EQ(forwards, table);
  ASSERT_EQ(backwards.size(), table.size());
  for (size_t k = 0; k < table.size(); ++k) EXPECT_EQ(backwards[k], std::pair(table[k].first, 1 - table[k].second));
  EXPECT_EQ(program->stages[1][3].kind, PipelineOp::Kind::kForward);
  EXPECT_EQ(program->stages[1][4].kind, PipelineOp::Kind::kBackward);
  // The classic order: groups of pp over a multiple of pp, one stream each way as before.
  EXPECT_FALSE(InterleavedProgram(4, 2, 8)->p2p_by_direction);
  auto message = [](const absl::StatusOr<PipelineProgram>& p) { return std::string(p.status().message()); };
  EXPECT_NE(message(InterleavedProgram(4, 2, 9, 4)).find("last group of 1, fewer than the pipeline depth (4)"),
            std::string::npos);
  EXPECT_NE(message(InterleavedProgram(4, 2, 9, 3)).find("must hold from the pipeline depth (4)"), std::string::npos);
  EXPECT_NE(message(InterleavedProgram(4, 2, 9, 10)).find("to the micro-batch count (9)"), std::string::npos);
  EXPECT_NE(message(InterleavedProgram(4, 2, 3)).find("at least as many micro-batches (3)"), std::string::npos);
}

// With the table in groups, every micro-batch count and group Megatron-Core accepts keeps
// interleaving's bubble: m (f + b) + (p - 1)(f + b) / v (equal stage times, free
// communication), and runs without a deadlock with communication paid too (the gradients'
// transfers posted apart from the activations'). The default group (0) for a count that is
// not a multiple of p is the smallest one accepted.
TEST(PipelineClosedForm, InterleavedGroupsKeepTheBubbleForEveryAcceptedCount) {
  int cases = 0;
  for (int p : {2, 3, 4, 5}) {
    for (int v : {2, 3}) {
      const ModelGraph model = Gpt(2 * p * v);
      const Cluster cluster = StarCluster(p, 1e10, 1e-6);
      const double f = v * 2 * 2 * kLayer, b = 2 * f;
      for (int m = p; m <= 3 * p + 1; ++m) {
        const Plan plan = UniformPlan(model, 1, p, 1, v, m);
        for (int g = 0; g <= m; ++g) {
          if (g > 0 && (g < p || (m % g != 0 && m % g < p))) continue;
          auto program = InterleavedProgram(p, v, m, g);
          ASSERT_TRUE(program.ok()) << program.status();
          SCOPED_TRACE(::testing::Message() << "p=" << p << " v=" << v << " m=" << m << " group=" << g);
          const Outcome o = SimulateProgram(model, plan, *program, cluster);
          EXPECT_NEAR(o.result.iteration_time_s, m * (f + b) + (p - 1) * (f + b) / v, 1e-12);
          const Outcome paid = SimulateProgram(model, plan, *program, cluster, false);
          EXPECT_GT(paid.result.iteration_time_s, o.result.iteration_time_s);
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 150);
}

TEST(PipelineClosedForm, DataParallelReplicasRunInLockStepWhenCommunicationIsFree) {
  const int p = 2, m = 4, dp = 3;
  const ModelGraph model = Gpt(4);
  const Plan plan = UniformPlan(model, 1, p, dp, 1, m);
  const double f = 4 * kLayer, b = 2 * f;
  const Outcome o = SimulateProgram(model, plan, OneFOneBProgram(p, m), StarCluster(p * dp, 1e10, 1e-6));
  EXPECT_NEAR(o.result.iteration_time_s, (m + p - 1) * (f + b), 1e-12);
}

TEST(PipelineClosedForm, BlockingTensorParallelCommunicationAddsUpOnTheCriticalPath) {
  // One stage, one micro-batch, TP 2: forward and backward each all-reduce after every
  // attention and MLP layer, all on the compute stream; plus the embedding's forward
  // all-reduce and the head's backward one.
  const ModelGraph model = Gpt(2, 1024, 512);
  const Plan plan = UniformPlan(model, 2, 1, 1, 1, 1);
  const double bw = 5e9, lat = 1e-6;
  const Cluster cluster = StarCluster(2, bw, lat);
  const Outcome free = SimulateProgram(model, plan, OneFOneBProgram(1, 1), cluster, true);
  const Outcome paid = SimulateProgram(model, plan, OneFOneBProgram(1, 1), cluster, false);
  collectives::Ring ring(collectives::CommTuning{});
  double comm = 0;
  for (const Layer& l : model.layers) {
    for (std::int64_t bytes : {l.tp_fwd_allreduce_bytes_per_sample, l.tp_bwd_allreduce_bytes_per_sample}) {
      if (bytes == 0) continue;
      // n = 2: 2(n-1)/n * S/B + 2(n-1) * alpha with alpha = two link latencies.
      comm += bytes / bw + 2 * (2 * lat);
    }
  }
  EXPECT_NEAR(paid.result.iteration_time_s - free.result.iteration_time_s, comm, 1e-9);
}

TEST(PipelineClosedForm, SubPipelinedTensorParallelismHidesCommunication) {
  const ModelGraph model = Gpt(4, 1024, 1024);
  const Plan plan = UniformPlan(model, 2, 1, 1, 1, 1);
  const Cluster cluster = StarCluster(2, 5e9, 1e-6);
  ExpandOptions blocking;
  ExpandOptions overlapped;
  overlapped.tp_chunks = 2;
  overlapped.tp_overlap = true;
  const Outcome a = SimulateProgram(model, plan, OneFOneBProgram(1, 1), cluster, false, blocking);
  const Outcome c = SimulateProgram(model, plan, OneFOneBProgram(1, 1), cluster, false, overlapped);
  EXPECT_LT(c.result.iteration_time_s, a.result.iteration_time_s);
  EXPECT_LT(c.result.devices[0].exposed_comm_s, a.result.devices[0].exposed_comm_s);
  // Compute is the same work either way.
  EXPECT_NEAR(c.result.devices[0].compute_s, a.result.devices[0].compute_s, 1e-12);
}

// Two blocks at TP 2 with two sub-batches per micro-batch (Oases, Merak), every attention and
// MLP op all-reducing the same bytes forward and backward (the embedding's and head's
// all-reduces removed): the compute and tensor-comm streams form a two-stage pipeline of 2n
// sub-batch tasks per pass (n = 4 ops), so a pass takes 2n x max(c, m) + min(c, m) for
// per-sub-batch compute c and all-reduce m; forward and backward meet at the head.
struct OverlapCase {
  ModelGraph model;
  double c = 0.5 * kLayer;  // forward of one op on one sub-batch
  double m = 0;             // its all-reduce
};

OverlapCase TwoBlocksAllReducing(double m_over_c) {
  OverlapCase oc{Gpt(2, 1024, 1024)};
  const double bw = 5e9, lat = 1e-6;
  // One sample, two sub-batches: each all-reduces half the per-sample bytes.
  const auto per_sample = 2 * static_cast<std::int64_t>((m_over_c * oc.c - 4 * lat) * bw);
  for (Layer& l : oc.model.layers) {
    const bool op = l.kind == LayerKind::kAttention || l.kind == LayerKind::kMlp;
    l.tp_fwd_allreduce_bytes_per_sample = op ? per_sample : 0;
    l.tp_bwd_allreduce_bytes_per_sample = op ? per_sample : 0;
  }
  oc.m = static_cast<double>(per_sample / 2) / bw + 2 * (2 * lat);  // ring of two: S/B + 2 hops' latency twice
  return oc;
}

double OverlapTime(const OverlapCase& oc, bool recompute, ExpandOptions o) {
  Plan plan = UniformPlan(oc.model, 2, 1, 1, 1, 1);
  if (recompute) {
    plan.recompute = RecomputeMode::kFull;
    plan.MutableChunk(0, 0).recompute_layers = plan.Chunk(0, 0).end_layer - plan.Chunk(0, 0).first_layer;
  }
  o.tp_chunks = 2;
  o.tp_overlap = true;
  return SimulateProgram(oc.model, plan, OneFOneBProgram(1, 1), StarCluster(2, 5e9, 1e-6), false, o).result.iteration_time_s;
}

TEST(PipelineClosedForm, OverlappedSubBatchesTakeTheMaxOfComputeAndCommunication) {
  const int n = 4;
  for (double ratio : {5.0, 0.4}) {  // communication-bound, compute-bound
    const OverlapCase oc = TwoBlocksAllReducing(ratio);
    const double c = oc.c, m = oc.m;
    // Forward 2n x max(c, m) + min(c, m); backward the same with 2c.
    const double want = 2 * n * std::max(c, m) + std::min(c, m) + 2 * n * std::max(2 * c, m) + std::min(2 * c, m);
    EXPECT_NEAR(OverlapTime(oc, false, {}), want, 1e-9) << "m/c = " << ratio;
  }
}

TEST(PipelineClosedForm, CrossPassRecomputationFillsTheWaitForTheAllReduce) {
  // Oases' recomputation: no forward all-reduce repeated, each op recomputed on its sub-batch
  // just before its backward. Backward per sub-batch then computes 3c; communication-bound
  // (m >= 3c) only the first recompute and backward (3c) are exposed, compute-bound the
  // stream never waits.
  const int n = 4;
  ExpandOptions oases;
  oases.recompute_collectives = false;
  oases.recompute_interleaved = true;
  const OverlapCase slow = TwoBlocksAllReducing(5.0);
  EXPECT_NEAR(OverlapTime(slow, true, oases), (slow.c + 2 * n * slow.m) + (3 * slow.c + 2 * n * slow.m), 1e-9);
  const OverlapCase fast = TwoBlocksAllReducing(0.4);
  EXPECT_NEAR(OverlapTime(fast, true, oases), (2 * n * fast.c + fast.m) + (2 * n * 3 * fast.c + fast.m), 1e-9);
  // Recomputing the chunk's ops together before the backward exposes all of them: 2n c more
  // than the first recompute alone.
  ExpandOptions together = oases;
  together.recompute_interleaved = false;
  EXPECT_NEAR(OverlapTime(slow, true, together) - OverlapTime(slow, true, oases), (2 * n - 1) * slow.c, 1e-9);
  // Repeating the forward all-reduce in recomputation (Megatron-LM's) costs more.
  ExpandOptions repeat = oases;
  repeat.recompute_collectives = true;
  EXPECT_GT(OverlapTime(slow, true, repeat), OverlapTime(slow, true, oases) + n * slow.m);
}

TEST(PipelineClosedForm, DecomposedCollectivesJoinAtEveryOp) {
  // Wang et al.: op j + 1 starts once both parts of op j are reduced; with m >= 2c each op
  // takes c + 2m forward and 2c + 2m backward.
  const int n = 4;
  const OverlapCase oc = TwoBlocksAllReducing(5.0);
  ExpandOptions join;
  join.tp_chunk_join = true;
  EXPECT_NEAR(OverlapTime(oc, false, join), n * (oc.c + 2 * oc.m) + n * (2 * oc.c + 2 * oc.m), 1e-9);
}

TEST(PipelineClosedForm, SimulationIsDeterministic) {
  const ModelGraph model = Gpt(8);
  const Plan plan = UniformPlan(model, 2, 2, 2, 1, 4);
  const Cluster cluster = StarCluster(8, 2e9, 2e-6);
  const Outcome a = SimulateProgram(model, plan, OneFOneBProgram(2, 4), cluster, false);
  const Outcome b = SimulateProgram(model, plan, OneFOneBProgram(2, 4), cluster, false);
  EXPECT_EQ(a.result.task_start_s, b.result.task_start_s);
  EXPECT_EQ(a.result.task_end_s, b.result.task_end_s);
}

}  // namespace
}  // namespace testbed::testing
