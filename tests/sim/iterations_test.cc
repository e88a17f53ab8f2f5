// Iterations and modes (core v3): `train.steps` iterations in one schedule, with a flush
// each or none (PipeDream-2BW), and inputs that change per iteration (MoE routing); each
// against a closed form or a hand-worked case.
#include <gtest/gtest.h>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/memory_model.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kLayer = 1e-3;

struct Ran {
  Schedule schedule;
  SimResult result;
};

Ran RunProgram(const ModelGraph& model, const Cluster& cluster, const Plan& plan, const ProgramSource& programs,
               int iterations, bool free_comm, const StepInputs* inputs = nullptr) {
  TrainSettings train;
  const ConstantDeviceModel dm(kLayer);
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm, nullptr, inputs, iterations};
  auto s = ExpandPipeline(ctx, programs, ExpandOptions{});
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  EXPECT_TRUE(s->Check().ok()) << s->Check();
  SimOptions o;
  o.free_communication = free_comm;
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return {std::move(*s), r.ok() ? *r : SimResult{}};
}

TEST(Iterations, FlushedIterationsRunOneAfterAnother) {
  const int p = 4, m = 6;
  const ModelGraph model = Gpt(8);
  const Cluster cluster = StarCluster(p, 1e10, 1e-6);
  const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
  const double f = 4 * kLayer, b = 2 * f;  // two blocks of two layers per stage
  ProgramSource ofob = [p](int mb) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(p, mb); };
  for (int n : {1, 2, 3}) {
    const Ran r = RunProgram(model, cluster, plan, ofob, n, true);
    EXPECT_EQ(r.schedule.iterations(), n);
    EXPECT_NEAR(r.result.iteration_time_s, n * (m + p - 1) * (f + b), 1e-12) << n;
    ASSERT_EQ(r.result.iteration_end_s.size(), static_cast<size_t>(n));
    EXPECT_NEAR(r.result.iteration_end_s.front(), (m + p - 1) * (f + b), 1e-12);
  }
}

TEST(Iterations, PipeDream2BWReachesTheSteadyStateClosedForm) {
  // No flush: 1F1B over all n x m micro-batches, warm-up and drain once. Equal stages:
  // T(n) = (n m + p - 1)(f + b), so each iteration past the first adds m (f + b).
  const int p = 4, m = 4;
  const ModelGraph model = Gpt(8);
  const Cluster cluster = StarCluster(p, 1e10, 1e-6);
  const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
  const double f = 4 * kLayer, b = 2 * f;
  double prev = 0;
  for (int n : {1, 2, 3, 5}) {
    ProgramSource twobw = [p, n](int mb) -> absl::StatusOr<PipelineProgram> { return PipeDream2BWProgram(p, mb, n); };
    const Ran r = RunProgram(model, cluster, plan, twobw, n, true);
    EXPECT_NEAR(r.result.iteration_time_s, (n * m + p - 1) * (f + b), 1e-12) << n;
    if (n == 2) {
      EXPECT_NEAR(r.result.iteration_time_s - prev, m * (f + b), 1e-12);
    }
    prev = r.result.iteration_time_s;
  }
}

TEST(Iterations, PipeDream2BWStashesASecondWeightVersion) {
  const int p = 2, m = 4;
  const ModelGraph model = Gpt(4);
  const Cluster cluster = StarCluster(p, 1e10, 1e-6);
  const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
  ProgramSource ofob = [p](int mb) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(p, mb); };
  ProgramSource twobw = [p](int mb) -> absl::StatusOr<PipelineProgram> { return PipeDream2BWProgram(p, mb, 2); };
  const Ran flush = RunProgram(model, cluster, plan, ofob, 2, true);
  const Ran stash = RunProgram(model, cluster, plan, twobw, 2, true);
  for (int s = 0; s < p; ++s) {
    const double weights = StageParams(plan, model, s) * 2;  // fp16
    EXPECT_DOUBLE_EQ(stash.schedule.static_bytes(s) - flush.schedule.static_bytes(s), weights) << s;
    EXPECT_DOUBLE_EQ(stash.result.devices[static_cast<size_t>(s)].static_bytes, stash.schedule.static_bytes(s));
  }
}

TEST(Iterations, PipeDream2BWAppliesEachUpdateBeforeTheIterationAfterNext) {
  const PipelineProgram prog = PipeDream2BWProgram(3, 4, 3);
  ASSERT_TRUE(CheckProgram(prog, 3, 1, 4, 3).ok()) << CheckProgram(prog, 3, 1, 4, 3);
  for (const auto& ops : prog.stages) {
    int steps = 0;
    for (const PipelineOp& op : ops) {
      if (op.kind == PipelineOp::Kind::kOptimizerStep) {
        EXPECT_EQ(op.iteration, steps++);
      } else if (op.kind == PipelineOp::Kind::kForward && op.micro_batch == 0 && op.iteration >= 2) {
        // W(i) is ready for iteration i: the update from iteration i - 2's gradients is in.
        EXPECT_EQ(steps, op.iteration - 1);
      }
    }
    EXPECT_EQ(steps, 3);
  }
}

TEST(Iterations, PipeDream2BWCanStepAtEachIterationsLastBackwardInstead) {
  // PipeDream-2BW's runtime: each stage steps right after its last backward of an iteration.
  const PipelineProgram prog = PipeDream2BWProgram(3, 4, 3, false);
  ASSERT_TRUE(CheckProgram(prog, 3, 1, 4, 3).ok()) << CheckProgram(prog, 3, 1, 4, 3);
  for (const auto& ops : prog.stages) {
    int steps = 0;
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].kind != PipelineOp::Kind::kOptimizerStep) continue;
      EXPECT_EQ(ops[k].iteration, steps++);
      ASSERT_GT(k, 0u);
      EXPECT_EQ(ops[k - 1].kind, PipelineOp::Kind::kBackward);
      EXPECT_EQ(ops[k - 1].micro_batch, 3);
      EXPECT_EQ(ops[k - 1].iteration, ops[k].iteration);
    }
    EXPECT_EQ(steps, 3);
  }
  // Free communication: the same closed form as the deferred update (an untied head: with a
  // tied one, the last stage's step waits for the first stage's embedding gradient); with a
  // slow gradient all-reduce (2 replicas, 1 GB/s) the stage waits at each step, the deferred
  // one does not.
  const int p = 2, m = 4, n = 3;
  ModelShape shape;
  shape.name = "untied";
  shape.layers = 4;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.seq_len = 1024;
  shape.vocab = 1024;
  shape.tied_embeddings = false;
  const ModelGraph model = *BuildModelGraph(shape);
  const double f = 4 * kLayer, b = 2 * f;
  ProgramSource deferred = [](int mb) -> absl::StatusOr<PipelineProgram> { return PipeDream2BWProgram(2, mb, 3); };
  ProgramSource at_last = [](int mb) -> absl::StatusOr<PipelineProgram> { return PipeDream2BWProgram(2, mb, 3, false); };
  {
    const Cluster cluster = StarCluster(p, 1e10, 1e-6);
    const Plan plan = UniformPlan(model, 1, p, 1, 1, m);
    EXPECT_NEAR(RunProgram(model, cluster, plan, at_last, n, true).result.iteration_time_s, (n * m + p - 1) * (f + b), 1e-12);
  }
  const Cluster cluster = StarCluster(2 * p, 1e9, 1e-6);
  const Plan plan = UniformPlan(model, 1, p, 2, 1, m);
  const double waiting = RunProgram(model, cluster, plan, at_last, n, false).result.iteration_time_s;
  const double deferring = RunProgram(model, cluster, plan, deferred, n, false).result.iteration_time_s;
  EXPECT_GT(waiting, deferring);
}

ModelGraph Moe() { return MoeGpt(MoeSpec{}); }

// One stage of the whole model on four data-parallel replicas, one micro-batch of one sample.
GridSpec FourReplicas(const ModelGraph& model) {
  GridSpec g;
  g.dp = 4;
  g.micro_batch = 1;
  g.micro_batches = 1;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  return g;
}

TEST(Iterations, PerStepRoutingSetsEachIterationsAllToAll) {
  // Four ranks, one expert each (expert e on rank e), one micro-batch of one sequence of 128
  // tokens per rank; fp16 hidden states of 256: 512 bytes per token.
  const ModelGraph model = Moe();
  constexpr double kBw = 1e10, kLat = 1e-6;
  const Cluster cluster = StarCluster(4, kBw, kLat);
  const GridSpec g = FourReplicas(model);
  Plan plan = GridPlan(g);
  plan.experts.degree = 4;
  const int moe = 2;
  ASSERT_EQ(model.layers[moe].kind, LayerKind::kMoe);
  // Iteration 0: no routing given, tokens spread evenly (32 to each expert). Iteration 1:
  // every token goes to expert 0.
  StepInputs inputs;
  Routing skewed{4, 4, std::vector<double>(16, 0.0)};
  for (int r = 0; r < 4; ++r) skewed.tokens[static_cast<size_t>(r * 4)] = 128;
  inputs.Mutable(1).routing[moe] = skewed;
  ProgramSource ofob = [](int mb) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(1, mb); };
  const Ran r = RunProgram(model, cluster, plan, ofob, 2, false, &inputs);
  // By hand: evenly, each rank sends and receives 3 x 32 x 512 bytes; skewed, rank 0
  // receives 3 x 128 x 512 bytes, the busiest link.
  const double want[2] = {3 * 32 * 512 / kBw + 2 * kLat, 3 * 128 * 512 / kBw + 2 * kLat};
  int seen[2] = {0, 0};
  for (TaskId id = 0; id < static_cast<TaskId>(r.schedule.size()); ++id) {
    const Task& t = r.schedule.task(id);
    if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kAllToAllV && t.phase == Phase::kForward) {
      const double took = r.result.task_end_s[static_cast<size_t>(id)] - r.result.task_start_s[static_cast<size_t>(id)];
      EXPECT_NEAR(took, want[t.iteration], 1e-12) << r.schedule.Describe(id);
      ++seen[t.iteration];
    }
    if (t.kind == TaskKind::kCompute && r.schedule.compute(id).part == LayerPart::kMoeExperts && t.phase == Phase::kForward) {
      const double tokens = r.schedule.compute(id).expert_tokens;
      EXPECT_DOUBLE_EQ(tokens, t.iteration == 0 ? 128.0 : (t.device == 0 ? 512.0 : 0.0)) << r.schedule.Describe(id);
    }
  }
  EXPECT_EQ(seen[0], 2);  // dispatch and combine
  EXPECT_EQ(seen[1], 2);
}

TEST(Iterations, ExpertCopiesLeaveWhenTheirTimingSays) {
  // Expert 0 of the model's second MoE layer copied to rank 1 in both of two iterations.
  // After the step: the copy of iteration 1 leaves when iteration 0's optimizer step on its
  // owner ends, before the layer's gates; at the layer: after its gates; in the previous
  // block: two halves, after the first MoE layer's gates and after its experts.
  ModelShape shape = Moe().shape;
  shape.layers = 2;
  const ModelGraph model = *BuildModelGraph(shape);
  const Cluster cluster = StarCluster(4, 1e10, 1e-6);
  const GridSpec g = FourReplicas(model);
  int second = -1;
  for (size_t l = 0; l < model.layers.size(); ++l) second = model.layers[l].kind == LayerKind::kMoe ? static_cast<int>(l) : second;
  ProgramSource ofob = [](int mb) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(1, mb); };
  for (const CopyTiming timing : {CopyTiming::kAfterStep, CopyTiming::kAtLayer, CopyTiming::kPreviousBlock}) {
    Plan plan = GridPlan(g);
    plan.experts.degree = 4;
    plan.experts.copy_timing = timing;
    plan.experts.placement[second] = ExpertPlacement{{0, 1, 2, 3}, {{1}, {}, {}, {}}};
    const Ran r = RunProgram(model, cluster, plan, ofob, 2, false);
    const Schedule& s = r.schedule;
    auto end_of = [&](int iteration, int layer, LayerPart part) {
      double end = 0;
      for (TaskId j = 0; j < static_cast<TaskId>(s.size()); ++j) {
        const Task& u = s.task(j);
        if (u.iteration == iteration && u.kind == TaskKind::kCompute && u.phase == Phase::kForward && u.work >= 0 &&
            u.first_layer == layer && s.compute(j).part == part) {
          end = std::max(end, r.result.task_end_s[static_cast<size_t>(j)]);
        }
      }
      return end;
    };
    std::vector<std::pair<TaskId, double>> broadcasts;
    for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
      const Task& t = s.task(id);
      if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kBroadcast) {
        broadcasts.emplace_back(id, r.result.task_start_s[static_cast<size_t>(id)]);
      }
    }
    const int parts = timing == CopyTiming::kPreviousBlock ? 2 : 1;
    ASSERT_EQ(broadcasts.size(), static_cast<size_t>(2 * parts));
    for (size_t b = 0; b < broadcasts.size(); ++b) {
      const Task& t = s.task(broadcasts[b].first);
      const double start = broadcasts[b].second;
      const std::int64_t full = static_cast<std::int64_t>(static_cast<double>(model.layers[static_cast<size_t>(second)].expert_params) * 2);
      EXPECT_EQ(t.bytes, full / parts) << s.Describe(broadcasts[b].first);
      double optimizer_end = 0;
      for (TaskId j = 0; j < static_cast<TaskId>(s.size()); ++j) {
        const Task& u = s.task(j);
        if (u.iteration == t.iteration - 1 && u.kind == TaskKind::kKernel && u.device == 0) {
          optimizer_end = std::max(optimizer_end, r.result.task_end_s[static_cast<size_t>(j)]);
        }
      }
      const double gates = end_of(t.iteration, second, LayerPart::kMoeGate);
      if (timing == CopyTiming::kAfterStep) {
        EXPECT_DOUBLE_EQ(start, optimizer_end) << s.Describe(broadcasts[b].first);
        EXPECT_LT(start, gates);
      } else if (timing == CopyTiming::kAtLayer) {
        EXPECT_GE(start, gates) << s.Describe(broadcasts[b].first);
      } else {
        const int first_moe = second - 2;
        const LayerPart after = b % 2 == 0 ? LayerPart::kMoeGate : LayerPart::kMoeExperts;
        EXPECT_GE(start, end_of(t.iteration, first_moe, after)) << s.Describe(broadcasts[b].first);
        EXPECT_LT(start, gates) << s.Describe(broadcasts[b].first);
      }
    }
  }
}

TEST(Iterations, TheSmartScheduleExchangesTokensStepByStep) {
  // Four ranks in two groups (0-1, 2-3), a skewed routing. In two steps, step 0 moves tokens
  // within a group and step 1 across; per step one all-to-all out and one back, on the
  // expert stream; the steps' bytes and tokens add up to the single exchange's, and step 1's
  // exchange does not wait for step 0's expert compute.
  const ModelGraph model = Moe();
  const Cluster cluster = StarCluster(4, 1e9, 1e-6);
  const GridSpec g = FourReplicas(model);
  const int moe = 2;
  StepInputs inputs;
  Routing r{4, 4, {60, 30, 20, 18, 10, 80, 20, 18, 40, 40, 30, 18, 50, 20, 40, 18}};
  inputs.Mutable(0).routing[moe] = r;
  ProgramSource ofob = [](int mb) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(1, mb); };
  struct Seen {
    std::vector<std::int64_t> bytes = std::vector<std::int64_t>(16, 0);
    std::vector<double> tokens = std::vector<double>(4, 0);
    int exchanges = 0;
    bool overlapped = false;
  };
  auto run = [&](int steps) {
    Plan plan = GridPlan(g);
    plan.experts.degree = 4;
    plan.experts.exchange_steps = steps;
    const Ran ran = RunProgram(model, cluster, plan, ofob, 1, false, &inputs);
    Seen seen;
    std::vector<TaskId> out_exchanges, experts;
    for (TaskId id = 0; id < static_cast<TaskId>(ran.schedule.size()); ++id) {
      const Task& t = ran.schedule.task(id);
      if (t.phase != Phase::kForward) continue;
      if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kAllToAllV) {
        EXPECT_EQ(t.stream, steps > 1 ? streams::kExpertComm : streams::kCompute);
        ++seen.exchanges;
        // The outgoing exchanges are the first `steps` of the layer's; their bytes add up.
        if (static_cast<int>(out_exchanges.size()) < steps) {
          out_exchanges.push_back(id);
          const auto& b = ran.schedule.alltoallv_work()[static_cast<size_t>(t.work)].bytes;
          for (size_t i = 0; i < 16; ++i) seen.bytes[i] += b[i];
        }
      }
      if (t.kind == TaskKind::kCompute && t.work >= 0 && ran.schedule.compute(id).part == LayerPart::kMoeExperts) {
        seen.tokens[static_cast<size_t>(t.device)] += ran.schedule.compute(id).expert_tokens;
        experts.push_back(id);
      }
    }
    if (steps > 1) {
      // Step 1's exchange leaves as soon as step 0's has arrived, when step 0's experts start:
      // it does not wait for them (the test's device model makes expert work free, so the
      // overlap shows in the start times).
      const double arrived = ran.result.task_end_s[static_cast<size_t>(out_exchanges[0])];
      EXPECT_DOUBLE_EQ(ran.result.task_start_s[static_cast<size_t>(out_exchanges[1])], arrived);
      for (size_t k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(ran.result.task_start_s[static_cast<size_t>(experts[k])], arrived);
      seen.overlapped = true;
    }
    return seen;
  };
  const Seen one = run(1), two = run(2);
  EXPECT_EQ(one.exchanges, 2);
  EXPECT_EQ(two.exchanges, 4);
  EXPECT_EQ(two.bytes, one.bytes);
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(two.tokens[static_cast<size_t>(d)], one.tokens[static_cast<size_t>(d)]);
  EXPECT_TRUE(two.overlapped);
  // A number of steps that does not divide the ranks is refused.
  Plan bad = GridPlan(g);
  bad.experts.degree = 4;
  bad.experts.exchange_steps = 3;
  EXPECT_NE(bad.Validate(static_cast<int>(model.layers.size()), cluster).message().find("a divisor of the expert-parallel degree 4"),
            std::string::npos);
}

TEST(Iterations, ARoutingTableOfTheWrongShapeIsNamed) {
  const ModelGraph model = Moe();
  const Cluster cluster = StarCluster(4, 1e10, 1e-6);
  GridSpec g;
  g.dp = 4;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  Plan plan = GridPlan(g);
  plan.experts.degree = 4;
  StepInputs inputs;
  inputs.Mutable(0).routing[2] = Routing{2, 4, std::vector<double>(8, 1.0)};
  TrainSettings train;
  const ConstantDeviceModel dm(kLayer);
  SchedulingContext ctx{model, cluster, plan, train, dm, nullptr, &inputs, 1};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 1), ExpandOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("the routing of iteration 0 is for 2 ranks x 4 experts"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace testbed::testing
