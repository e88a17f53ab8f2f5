// Context parallelism against hand counts: at CP 2 every device of a group computes half of
// every layer's work (the attention core's causal work included: load-balanced chunks) on the
// same micro-batches, plus, per attention layer and micro-batch, an all-gather of the group's
// keys and values before the forward, another before the backward and a reduce-scatter of
// their gradients after it, each of 2 x tokens x (KV heads per TP rank) x head_dim x 2 bytes.
// The samples of an iteration do not change; bad plans are refused by name. With expert
// parallelism each EP and CP group exchanges on its own. Ring attention:
// the same work per device in degree steps, ring shifts of one rank's keys and values (with
// their gradients backward, and a last shift home), each overlapping a step's compute.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ring.h"
#include "roofline_model.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/layer_kernels.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr int kSeq = 4096, kHidden = 4096, kHeads = 32, kKvHeads = 8;  // LlamaLike's

ModelGraph Llama(int blocks) { return LlamaLike(blocks, 32000); }

// `replicas` replicas of one stage of `tp` devices; `cp` of them form each CP group.
Plan OneStage(const ModelGraph& model, int tp, int replicas, int cp, int micro_batches,
              RecomputeMode recompute = RecomputeMode::kNone) {
  GridSpec grid;
  grid.tp = tp;
  grid.dp = replicas;
  grid.micro_batch = 1;
  grid.micro_batches = micro_batches;
  grid.recompute = recompute;
  grid.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  Plan plan = GridPlan(grid);
  plan.context.degree = cp;
  return plan;
}

Plan Ring(Plan plan) {
  plan.context.ring = true;
  return plan;
}

struct Expanded {
  Schedule schedule;
  double iteration_s = 0;
  std::vector<double> start, end;
};

Expanded Expand(const ModelGraph& model, const Plan& plan, int micro_batches, const DeviceModel* given = nullptr) {
  const Cluster cluster = Hoppers(static_cast<int>(plan.Devices().size()));
  EXPECT_TRUE(plan.Validate(static_cast<int>(model.layers.size()), cluster).ok());
  const roofline::RooflineModel roofline(roofline::RooflineParams{});
  const DeviceModel& dm = given != nullptr ? *given : roofline;
  TrainSettings train;
  train.precision = Precision::kBf16;
  SchedulingContext ctx{model, cluster, plan, train, dm};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, micro_batches), ExpandOptions{});
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->Check().ok()) << s->Check();
  const collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return {*std::move(s), r->iteration_time_s, r->task_start_s, r->task_end_s};
}

// FLOPs device `d` computes, of layers of `kind` (every kind: nullopt).
double DeviceFlops(const Schedule& s, const ModelGraph& model, DeviceId d, std::optional<LayerKind> kind) {
  double flops = 0;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.kind != TaskKind::kCompute) continue;
    bool on = false;
    for (DeviceId m : s.DevicesOf(id)) on = on || m == d;
    if (!on) continue;
    const ComputeWork& w = s.compute(id);
    for (int l = w.first_layer; l < w.end_layer; ++l) {
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      if (kind && layer.kind != *kind) continue;
      LayerWork lw{&layer, t.phase, w.micro_batch, w.tp, w.sequence_parallel, w.precision,
                   static_cast<double>(w.fraction), w.selective_recompute, w.part, w.expert_tokens};
      for (const Kernel& k : LayerKernels(lw)) flops += k.flops;
    }
  }
  return flops;
}

std::vector<TaskId> ContextTasks(const Schedule& s) {
  std::vector<TaskId> out;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    if (s.task(id).stream == streams::kContextComm) out.push_back(id);
  }
  return out;
}

TEST(ContextParallel, Cp2HalvesEveryDevicesWorkOnTheSameSamples) {
  const ModelGraph model = Llama(2);
  const Plan one = OneStage(model, 1, 1, 1, 2);
  const Plan two = OneStage(model, 1, 2, 2, 2);
  EXPECT_EQ(one.SamplesPerIteration(), 2);
  EXPECT_EQ(two.SamplesPerIteration(), 2);  // two replicas, one CP group: the same sequences
  const Expanded a = Expand(model, one, 2), b = Expand(model, two, 2);
  const double attention1 = DeviceFlops(a.schedule, model, 0, LayerKind::kAttention);
  ASSERT_GT(attention1, 0);
  for (DeviceId d : {0, 1}) {
    EXPECT_DOUBLE_EQ(DeviceFlops(b.schedule, model, d, LayerKind::kAttention), attention1 / 2) << "device " << d;
    EXPECT_DOUBLE_EQ(DeviceFlops(b.schedule, model, d, std::nullopt), DeviceFlops(a.schedule, model, 0, std::nullopt) / 2);
  }
  // The attention core alone: its causal FLOPs on half the queries against all keys, load-
  // balanced, are half of the whole sequence's.
  const Layer& att = *std::find_if(model.layers.begin(), model.layers.end(),
                                   [](const Layer& l) { return l.kind == LayerKind::kAttention; });
  auto core = [&](double fraction) {
    LayerWork w{&att, Phase::kForward, 1, 1, false, Precision::kBf16, fraction};
    for (const Kernel& k : LayerKernels(w)) {
      if (std::string(k.name) == "flash_attention") return k.flops;
    }
    return 0.0;
  };
  ASSERT_GT(core(1.0), 0);
  EXPECT_DOUBLE_EQ(core(0.5), core(1.0) / 2);
  // Halved work, plus the exchanges: between half and all of the CP 1 iteration.
  EXPECT_LT(b.iteration_s, a.iteration_s);
  EXPECT_GT(b.iteration_s, a.iteration_s / 2);
  EXPECT_TRUE(ContextTasks(a.schedule).empty());
}

TEST(ContextParallel, EachAttentionLayerGathersKeysAndValuesAndReduceScattersTheirGradients) {
  const ModelGraph model = Llama(2);
  const int tp = 2, micro_batches = 3;
  const Plan plan = OneStage(model, tp, 2, 2, micro_batches);
  const Expanded x = Expand(model, plan, micro_batches);
  // Per TP rank, KV heads 8 / 2 = 4 of 128 dimensions, keys and values, BF16, 4096 tokens.
  const std::int64_t bytes = std::int64_t{kSeq} * 2 * (kKvHeads / tp) * (kHidden / kHeads) * 2;
  int gathers = 0, scatters = 0;
  for (TaskId id : ContextTasks(x.schedule)) {
    const Task& t = x.schedule.task(id);
    ASSERT_EQ(t.kind, TaskKind::kCollective);
    EXPECT_EQ(t.bytes, bytes);
    EXPECT_EQ(model.layers[static_cast<size_t>(t.first_layer)].kind, LayerKind::kAttention);
    // The ranks of one TP index in the two replicas: devices t and tp + t.
    const auto members = x.schedule.DevicesOf(id);
    ASSERT_EQ(members.size(), 2U);
    EXPECT_EQ(members[1] - members[0], tp);
    if (t.op == CollectiveOp::kAllGather) ++gathers;
    if (t.op == CollectiveOp::kReduceScatter) {
      ++scatters;
      EXPECT_EQ(t.phase, Phase::kBackward);
    }
  }
  // 2 attention layers x 3 micro-batches x 2 TP ranks: a gather forward, a gather and a
  // reduce-scatter backward.
  EXPECT_EQ(gathers, 2 * micro_batches * tp * 2);
  EXPECT_EQ(scatters, 2 * micro_batches * tp);
  // Full recomputation runs the forward again just before the backward: the one gather before
  // it serves both, so the count does not change, and the recomputed forward precedes the
  // backward's reduce-scatter.
  const Expanded r = Expand(model, OneStage(model, tp, 2, 2, micro_batches, RecomputeMode::kFull), micro_batches);
  int regathers = 0;
  for (TaskId id : ContextTasks(r.schedule)) regathers += r.schedule.task(id).op == CollectiveOp::kAllGather;
  EXPECT_EQ(regathers, gathers);
}

TEST(ContextParallel, GradientsAreSynchronisedOverEveryReplica) {
  const ModelGraph model = Llama(1);
  const Expanded x = Expand(model, OneStage(model, 1, 4, 2, 1), 1);
  int syncs = 0;
  for (TaskId id = 0; id < static_cast<TaskId>(x.schedule.size()); ++id) {
    const Task& t = x.schedule.task(id);
    if (t.kind != TaskKind::kCollective || t.stream != streams::kDataComm) continue;
    ++syncs;
    EXPECT_EQ(x.schedule.DevicesOf(id).size(), 4U) << x.schedule.Describe(id);
  }
  EXPECT_GT(syncs, 0);
  // Two CP groups of two replicas: devices {0, 1} and {2, 3}.
  for (TaskId id : ContextTasks(x.schedule)) {
    const auto m = x.schedule.DevicesOf(id);
    EXPECT_TRUE((m[0] == 0 && m[1] == 1) || (m[0] == 2 && m[1] == 3)) << x.schedule.Describe(id);
  }
}

TEST(ContextParallel, PlansItCannotRunAreRefusedByName) {
  const ModelGraph model = Llama(1);
  const int layers = static_cast<int>(model.layers.size());
  const Cluster cluster = Hoppers(4);
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  // CP 2 over 3 replicas.
  const absl::Status odd = OneStage(model, 1, 3, 2, 1).Validate(layers, cluster);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(message(odd).find("does not divide stage 0's 3 replicas"), std::string::npos) << odd;
  // The replicas of a group run different micro-batch counts.
  Plan uneven = OneStage(model, 1, 2, 2, 2);
  uneven.stages[0].replicas[1].micro_batches = 1;
  const absl::Status u = uneven.Validate(layers, cluster);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(message(u).find("one context-parallel group"), std::string::npos) << u;
  // With expert parallelism, the replicas must hold whole groups of both.
  Plan both = OneStage(model, 1, 4, 4, 1);
  both.experts.degree = 8;
  const absl::Status e = both.Validate(layers, cluster);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(message(e).find("expert-parallel degree 8 does not divide stage 0's 4"), std::string::npos) << e;
  Plan zero = OneStage(model, 1, 1, 1, 1);
  zero.context.degree = 0;
  EXPECT_FALSE(zero.Validate(layers, cluster).ok());
}


// A GPT-style MoE model: attention layers (split over the CP group) and MoE layers of 8
// experts, top-2 (their tokens exchanged inside the EP group).
ModelGraph MoeModel() { return MoeGpt(MoeSpec{2, 1024, 8, 2048, 8, 2}); }

// Context and expert parallelism in one plan, over 8 replicas of one stage: EP groups that
// span CP groups (CP 2, EP 4), CP groups that span EP groups (CP 4, EP 2) and equal ones. Every
// all-to-all joins one EP group and every KV exchange one CP group, each of consecutive
// replicas; each rank's experts take its 1/cp share of the sequence's tokens (even routing:
// 2048 / cp tokens x top-2 spread over 8 experts, 8 / ep of them on each of ep ranks), so the
// all-to-all's bytes are the hand count and every device does exactly 1/cp of the work it
// does at CP 1 with the same EP groups.
TEST(ContextParallel, WithExpertParallelismEachGroupExchangesOnItsOwn) {
  const ModelGraph model = MoeModel();
  const int replicas = 8, micro_batches = 2;
  for (const auto& [cp, ep] : {std::pair(2, 4), std::pair(4, 2), std::pair(2, 2)}) {
    SCOPED_TRACE(absl::StrCat("cp ", cp, ", ep ", ep));
    Plan plan = OneStage(model, 1, replicas, cp, micro_batches);
    plan.experts.degree = ep;
    Plan alone = OneStage(model, 1, replicas, 1, micro_batches);
    alone.experts.degree = ep;
    const Expanded x = Expand(model, plan, micro_batches), base = Expand(model, alone, micro_batches);
    auto consecutive = [](std::span<const DeviceId> m, int size) {
      bool ok = static_cast<int>(m.size()) == size && m[0] % size == 0;
      for (size_t i = 1; i < m.size(); ++i) ok = ok && m[i] == m[0] + static_cast<DeviceId>(i);
      return ok;
    };
    const double tokens = 2048.0 / cp;  // one sample per micro-batch
    const double per_pair = tokens * 2 / 8 * (8 / ep);  // tokens one rank sends another's experts
    int exchanges = 0, expert_runs = 0;
    for (TaskId id = 0; id < static_cast<TaskId>(x.schedule.size()); ++id) {
      const Task& t = x.schedule.task(id);
      if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kAllToAllV) {
        ++exchanges;
        EXPECT_TRUE(consecutive(x.schedule.DevicesOf(id), ep)) << x.schedule.Describe(id);
        const AllToAllVWork& w = x.schedule.alltoallv_work()[static_cast<size_t>(t.work)];
        for (int i = 0; i < ep; ++i) {
          for (int j = 0; j < ep; ++j) {
            EXPECT_EQ(w.bytes[static_cast<size_t>(i * ep + j)], static_cast<std::int64_t>(per_pair * 1024 * 2))
                << x.schedule.Describe(id) << " from " << i << " to " << j;
          }
        }
      }
      if (t.kind == TaskKind::kCompute && x.schedule.compute(id).part == LayerPart::kMoeExperts) {
        ++expert_runs;
        EXPECT_DOUBLE_EQ(x.schedule.compute(id).expert_tokens, per_pair * ep) << x.schedule.Describe(id);
      }
    }
    // 2 MoE layers x 2 micro-batches x 8 / ep groups: dispatch and combine, forward and backward.
    EXPECT_EQ(exchanges, 2 * micro_batches * (replicas / ep) * 4);
    EXPECT_EQ(expert_runs, 2 * micro_batches * replicas * 2);
    const std::vector<TaskId> context = ContextTasks(x.schedule);
    // 2 attention layers x 2 micro-batches x 8 / cp groups: two gathers and a reduce-scatter.
    EXPECT_EQ(context.size(), static_cast<size_t>(2 * micro_batches * (replicas / cp) * 3));
    for (TaskId id : context) EXPECT_TRUE(consecutive(x.schedule.DevicesOf(id), cp)) << x.schedule.Describe(id);
    for (DeviceId d = 0; d < replicas; ++d) {
      const double whole = DeviceFlops(base.schedule, model, d, std::nullopt);
      ASSERT_GT(whole, 0);
      EXPECT_NEAR(DeviceFlops(x.schedule, model, d, std::nullopt), whole / cp, 1e-12 * whole) << "device " << d;
    }
    EXPECT_LT(x.iteration_s, base.iteration_s);
  }
}

TEST(RingAttention, SameWorkPerDeviceInStepsWithRingShiftsOfOneBlock) {
  const ModelGraph model = Llama(2);
  const int tp = 2, micro_batches = 3;
  const Expanded gathered = Expand(model, OneStage(model, tp, 2, 2, micro_batches), micro_batches);
  const Expanded ring = Expand(model, Ring(OneStage(model, tp, 2, 2, micro_batches)), micro_batches);
  for (DeviceId d = 0; d < 4; ++d) {
    EXPECT_NEAR(DeviceFlops(ring.schedule, model, d, std::nullopt), DeviceFlops(gathered.schedule, model, d, std::nullopt),
                1e-9 * DeviceFlops(gathered.schedule, model, d, std::nullopt))
        << "device " << d;
  }
  // One rank's keys and values: half the group's 4,096 tokens, 4 KV heads per TP rank of 128
  // dimensions, keys and values, BF16.
  const std::int64_t block = std::int64_t{kSeq} / 2 * 2 * (kKvHeads / tp) * (kHidden / kHeads) * 2;
  int forward = 0, backward = 0, home = 0;
  for (TaskId id : ContextTasks(ring.schedule)) {
    const Task& t = ring.schedule.task(id);
    ASSERT_EQ(t.kind, TaskKind::kCollective);
    ASSERT_EQ(t.op, CollectiveOp::kAllToAllV);
    const auto members = ring.schedule.DevicesOf(id);
    ASSERT_EQ(members.size(), 2U);
    EXPECT_EQ(members[1] - members[0], tp);
    const AllToAllVWork& w = ring.schedule.alltoallv_work()[static_cast<size_t>(t.work)];
    ASSERT_EQ(w.bytes.size(), 4U);
    // Each rank sends to the next: 0 -> 1 and 1 -> 0, nothing to itself.
    EXPECT_EQ(w.bytes[0], 0);
    EXPECT_EQ(w.bytes[3], 0);
    EXPECT_EQ(w.bytes[1], w.bytes[2]);
    if (t.phase == Phase::kForward) {
      EXPECT_EQ(w.bytes[1], block);
      ++forward;
    } else if (w.bytes[1] == 2 * block) {
      ++backward;
    } else {
      EXPECT_EQ(w.bytes[1], block);
      ++home;
    }
  }
  // Per attention layer (2), micro-batch (3) and TP rank (2): cp - 1 = 1 shift forward, 1
  // backward with the gradients, 1 home.
  EXPECT_EQ(forward, 2 * micro_batches * tp);
  EXPECT_EQ(backward, 2 * micro_batches * tp);
  EXPECT_EQ(home, 2 * micro_batches * tp);
}

TEST(RingAttention, AStepWaitsForItsBlockAndTheShiftOverlapsTheStepBefore) {
  // One block, one micro-batch, CP 2, layers taking c forward each (the constant model): the
  // attention's two forward steps take c / 4 each (half of the layer per rank, in two steps);
  // the second starts at max(end of the first, end of the shift), which started with the first.
  const ModelGraph model = Llama(1);
  for (const double c : {1e-2, 1e-7}) {
    const ConstantDeviceModel dm(c);
    const Expanded x = Expand(model, Ring(OneStage(model, 1, 2, 2, 1)), 1, &dm);
    std::vector<TaskId> steps;
    TaskId shift = -1;
    for (TaskId id = 0; id < static_cast<TaskId>(x.schedule.size()); ++id) {
      const Task& t = x.schedule.task(id);
      if (t.phase != Phase::kForward || t.first_layer < 0) continue;
      if (model.layers[static_cast<size_t>(t.first_layer)].kind != LayerKind::kAttention) continue;
      if (t.kind == TaskKind::kCompute && x.schedule.DevicesOf(id).front() == 0) steps.push_back(id);
      if (t.stream == streams::kContextComm) shift = id;
    }
    ASSERT_EQ(steps.size(), 2U);
    ASSERT_GE(shift, 0);
    auto took = [&](TaskId id) { return x.end[static_cast<size_t>(id)] - x.start[static_cast<size_t>(id)]; };
    EXPECT_NEAR(took(steps[0]), c / 4, 1e-15);
    EXPECT_NEAR(took(steps[1]), c / 4, 1e-15);
    EXPECT_DOUBLE_EQ(x.start[static_cast<size_t>(shift)], x.start[static_cast<size_t>(steps[0])]);
    EXPECT_DOUBLE_EQ(x.start[static_cast<size_t>(steps[1])],
                     std::max(x.end[static_cast<size_t>(steps[0])], x.end[static_cast<size_t>(shift)]));
    // One block over a 400 GB/s link: hidden under a 2.5 ms step, exposed after a 25 ns one.
    const double block = static_cast<double>(kSeq) / 2 * 2 * kKvHeads * (kHidden / kHeads) * 2;
    EXPECT_GE(took(shift), block / 400e9);
    EXPECT_LT(took(shift), block / 400e9 + 1e-5);
  }
}

}  // namespace
}  // namespace testbed::testing
