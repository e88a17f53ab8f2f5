// Sparse embedding communication in the expansion (ExpandOptions::embedding_exchange =
// kAllToAll) against hand counts and the timeline: lookups and gradient rows carry the
// counted bytes, the embedding leaves the dense buckets and each replica keeps its share of
// the table; forwards wait for their rows, row gradients for the embedding's backward and
// lookups of changed rows for the update they read (one iteration back, two under
// PipeDream-2BW); EmbRace's 2D scheduling (input gradients first, untouched rows fetched
// early) overlaps the exchange with the weight gradients and is faster; refusals. The data
// audit (sim/data_audit.h) holds every run here, and catches a schedule that sends too early.
#include <gtest/gtest.h>

#include <algorithm>

#include "ring.h"
#include "roofline_model.h"
#include "sim/data_audit.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/memory_model.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kLayer = 1e-3;
constexpr std::int64_t kHidden = 64;

ModelGraph UntiedGpt(int blocks, bool tied = false) {
  ModelShape s;
  s.name = "untied";
  s.layers = blocks;
  s.hidden = kHidden;
  s.heads = 4;
  s.seq_len = 16;
  s.vocab = 4096;
  s.tied_embeddings = tied;
  return *BuildModelGraph(s);
}

// rows[i][j] of a 2-replica iteration, with its stale part.
SparseRows Rows(std::vector<double> rows, std::vector<double> stale) {
  SparseRows r;
  r.replicas = 2;
  r.rows = std::move(rows);
  r.stale = std::move(stale);
  return r;
}

struct Ran {
  Schedule schedule;
  SimResult result;
};

// `device_model` null: every attention or MLP layer takes kLayer (ConstantDeviceModel).
absl::StatusOr<Ran> Expanded(const ModelGraph& model, const Plan& plan, const ExpandOptions& o, int iterations,
                             const StepInputs* inputs, bool two_bw = false, double bandwidth = 1e9,
                             const DeviceModel* device_model = nullptr, const TrainSettings& train = TrainSettings{}) {
  const Cluster cluster = StarCluster(plan.num_devices(), bandwidth, 0);
  const ConstantDeviceModel constant(kLayer);
  const DeviceModel& dm = device_model != nullptr ? *device_model : constant;
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm, nullptr, inputs, iterations};
  const int pp = plan.pp();
  ProgramSource programs = [pp, iterations, two_bw](int m) -> absl::StatusOr<PipelineProgram> {
    return two_bw ? PipeDream2BWProgram(pp, m, iterations) : OneFOneBProgram(pp, m);
  };
  auto s = ExpandPipeline(ctx, programs, o);
  if (!s.ok()) return s.status();
  if (absl::Status st = s->Check(); !st.ok()) return st;
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  if (!r.ok()) return r.status();
  auto audit = sim::AuditDataDependencies(*s, r->task_start_s, r->task_end_s);
  if (!audit.ok()) return audit.status();
  return Ran{*std::move(s), *std::move(r)};
}

ExpandOptions Sparse(bool two_d) {
  ExpandOptions o;
  o.embedding_exchange = EmbeddingExchange::kAllToAll;
  o.embedding_prefetch = two_d;
  o.split_backward = two_d;
  return o;
}

std::vector<TaskId> SparseTasks(const Schedule& s, TaskKind kind, Phase phase, int iteration) {
  std::vector<TaskId> out;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.stream == streams::kSparseComm && t.kind == kind && t.iteration == iteration &&
        (kind == TaskKind::kKernel || t.phase == phase)) {
      out.push_back(id);
    }
  }
  return out;
}

const std::vector<std::int64_t>& Matrix(const Schedule& s, TaskId id) {
  return s.alltoallv_work()[static_cast<size_t>(s.task(id).work)].bytes;
}

TEST(SparseEmbedding, LookupsAndRowGradientsCarryTheCountedBytes) {
  const ModelGraph model = UntiedGpt(2);
  const Plan plan = UniformPlan(model, 1, 1, 2, 1, 1, 4);
  StepInputs in;
  in.Mutable(0).embedding_rows[0] = Rows({30, 10, 20, 40}, {0, 0, 0, 0});
  auto r = Expanded(model, plan, Sparse(false), 1, &in);
  ASSERT_TRUE(r.ok()) << r.status();
  const Schedule& s = r->schedule;
  const auto lookups = SparseTasks(s, TaskKind::kCollective, Phase::kForward, 0);
  const auto grads = SparseTasks(s, TaskKind::kCollective, Phase::kBackward, 0);
  const auto updates = SparseTasks(s, TaskKind::kKernel, Phase::kForward, 0);
  ASSERT_EQ(lookups.size(), 1u);
  ASSERT_EQ(grads.size(), 1u);
  ASSERT_EQ(updates.size(), 2u);
  // Lookup: i sends 8 bytes per row id it asks j for, and the fp16 rows j asks it for.
  const std::int64_t row = kHidden * 2;
  EXPECT_EQ(Matrix(s, lookups[0]), (std::vector<std::int64_t>{0, 8 * 10 + 20 * row, 8 * 20 + 10 * row, 0}));
  // Gradients: each row's fp16 gradient and its id, to the owner.
  EXPECT_EQ(Matrix(s, grads[0]), (std::vector<std::int64_t>{0, 10 * (row + 8), 20 * (row + 8), 0}));
  // Each owner updates the 50 rows named by either replica (Adam: 12 FLOPs a parameter).
  for (TaskId u : updates) EXPECT_DOUBLE_EQ(s.kernel(u).flops, 50.0 * kHidden * 12);
  // The embedding is in no dense bucket.
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.kind == TaskKind::kCollective && t.stream == streams::kDataComm) {
      EXPECT_GE(t.first_layer, 1) << s.Describe(id);
    }
  }
  // Each replica keeps half the table with its optimizer state.
  auto dense = Expanded(model, plan, ExpandOptions{}, 1, nullptr);
  ASSERT_TRUE(dense.ok()) << dense.status();
  const double half = static_cast<double>(model.layers.front().params) / 2;
  EXPECT_NEAR(dense->schedule.static_bytes(0) - s.static_bytes(0),
              StaticBytes(half, Precision::kFp16, "adam", 0, 2).total(), 1e-6);
}

TEST(SparseEmbedding, ForwardsWaitForTheirRowsAndRowGradientsForTheEmbeddingBackward) {
  const ModelGraph model = UntiedGpt(2);
  const Plan plan = UniformPlan(model, 1, 1, 2, 1, 2, 4);
  StepInputs in;
  for (int t = 0; t < 2; ++t) in.Mutable(t).embedding_rows[0] = Rows({3000, 1000, 2000, 4000}, {500, 200, 300, 800});
  auto r = Expanded(model, plan, Sparse(false), 2, &in);
  ASSERT_TRUE(r.ok()) << r.status();
  const Schedule& s = r->schedule;
  const auto& start = r->result.task_start_s;
  const auto& end = r->result.task_end_s;
  for (int t = 0; t < 2; ++t) {
    const auto lookups = SparseTasks(s, TaskKind::kCollective, Phase::kForward, t);
    ASSERT_EQ(lookups.size(), 1u);
    double first_compute = 1e9, last_embedding_bwd = 0;
    for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
      const Task& task = s.task(id);
      if (task.kind != TaskKind::kCompute || task.iteration != t) continue;
      first_compute = std::min(first_compute, start[static_cast<size_t>(id)]);
      if (task.phase == Phase::kBackward && task.first_layer == 0) {
        last_embedding_bwd = std::max(last_embedding_bwd, end[static_cast<size_t>(id)]);
      }
    }
    EXPECT_GE(first_compute, end[static_cast<size_t>(lookups[0])]) << t;
    const auto grads = SparseTasks(s, TaskKind::kCollective, Phase::kBackward, t);
    ASSERT_EQ(grads.size(), 1u);
    EXPECT_GE(start[static_cast<size_t>(grads[0])], last_embedding_bwd) << t;
  }
  // Iteration 1's lookup reads the rows iteration 0's update wrote.
  const auto updates0 = SparseTasks(s, TaskKind::kKernel, Phase::kForward, 0);
  const auto lookup1 = SparseTasks(s, TaskKind::kCollective, Phase::kForward, 1);
  for (TaskId u : updates0) EXPECT_GE(start[static_cast<size_t>(lookup1[0])], end[static_cast<size_t>(u)]);
}

TEST(SparseEmbedding, TwoDSchedulingOverlapsTheRowsWithTheWeightGradientsAndIsFaster) {
  const ModelGraph model = UntiedGpt(4);
  const Plan plan = UniformPlan(model, 1, 1, 2, 1, 1, 4);
  StepInputs in;
  // Rows heavy enough that the exchange takes about a layer's time at 1 GB/s.
  for (int t = 0; t < 3; ++t) in.Mutable(t).embedding_rows[0] = Rows({3000, 4000, 4000, 3000}, {1000, 1500, 1500, 1000});
  auto plain = Expanded(model, plan, Sparse(false), 3, &in);
  auto two_d = Expanded(model, plan, Sparse(true), 3, &in);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(two_d.ok()) << two_d.status();
  const Schedule& s = two_d->schedule;
  const auto& start = two_d->result.task_start_s;
  const auto& end = two_d->result.task_end_s;
  // The row gradients leave before the weights' gradients of iteration 0 are done.
  const auto grads = SparseTasks(s, TaskKind::kCollective, Phase::kBackward, 0);
  double last_weights = 0;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.kind == TaskKind::kCompute && t.iteration == 0 && s.compute(id).part == LayerPart::kBackwardWeights) {
      last_weights = std::max(last_weights, end[static_cast<size_t>(id)]);
    }
  }
  EXPECT_LT(start[static_cast<size_t>(grads[0])], last_weights);
  // Iteration 1's untouched rows (part 0 of 2) are fetched during iteration 0; its changed
  // rows (part 1 of 2) wait for iteration 0's update.
  const auto lookups1 = SparseTasks(s, TaskKind::kCollective, Phase::kForward, 1);
  ASSERT_EQ(lookups1.size(), 2u);
  const auto updates0 = SparseTasks(s, TaskKind::kKernel, Phase::kForward, 0);
  for (TaskId l : lookups1) {
    const Task& t = s.task(l);
    ASSERT_EQ(t.sub_batches, 2);
    for (TaskId u : updates0) {
      if (t.sub_batch == 1) {
        EXPECT_GE(start[static_cast<size_t>(l)], end[static_cast<size_t>(u)]);
      } else {
        EXPECT_LT(start[static_cast<size_t>(l)], end[static_cast<size_t>(u)]);
      }
    }
  }
  EXPECT_LT(two_d->result.iteration_time_s, plain->result.iteration_time_s);
}

TEST(SparseEmbedding, UnderPipeDream2BWALookupReadsTheUpdateOfTwoIterationsBefore) {
  const ModelGraph model = UntiedGpt(4);
  const Plan plan = UniformPlan(model, 1, 2, 2, 1, 2, 4);
  StepInputs in;
  for (int t = 0; t < 4; ++t) in.Mutable(t).embedding_rows[0] = Rows({300, 100, 200, 400}, {50, 20, 30, 80});
  auto r = Expanded(model, plan, Sparse(true), 4, &in, true);
  ASSERT_TRUE(r.ok()) << r.status();
  const Schedule& s = r->schedule;
  for (int t = 2; t < 4; ++t) {
    for (TaskId l : SparseTasks(s, TaskKind::kCollective, Phase::kForward, t)) {
      if (s.task(l).sub_batch != 1) continue;
      std::vector<int> read;
      for (TaskId d : s.deps(l)) {
        if (s.task(d).kind == TaskKind::kKernel && s.task(d).stream == streams::kSparseComm) read.push_back(s.task(d).iteration);
      }
      EXPECT_EQ(read, (std::vector<int>{t - 2, t - 2})) << t;
    }
  }
}

TEST(SparseEmbedding, RowsAreDrawnWhenTheRunGivesNone) {
  const ModelGraph model = UntiedGpt(2);
  const Plan plan = UniformPlan(model, 1, 1, 2, 1, 1, 4);
  auto r = Expanded(model, plan, Sparse(true), 2, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto grads = SparseTasks(r->schedule, TaskKind::kCollective, Phase::kBackward, 0);
  ASSERT_EQ(grads.size(), 1u);
  // 4 sequences of 16 tokens per replica: at most 64 distinct rows, some on each owner.
  const auto& m = Matrix(r->schedule, grads[0]);
  EXPECT_GT(m[1], 0);
  EXPECT_LE(m[1], 64 * (kHidden * 2 + 8));
}

TEST(SparseEmbedding, WhatItCannotRunIsRefusedByName) {
  const ModelGraph tied = UntiedGpt(2, true);
  auto r = Expanded(tied, UniformPlan(tied, 1, 2, 2, 1, 2, 4), Sparse(false), 1, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tied_embeddings = false"), std::string::npos) << r.status();
  const ModelGraph model = UntiedGpt(2);
  auto tp = Expanded(model, UniformPlan(model, 2, 1, 2, 1, 1, 4), Sparse(false), 1, nullptr);
  ASSERT_FALSE(tp.ok());
  EXPECT_NE(tp.status().message().find("tensor-parallel degree 1"), std::string::npos) << tp.status();
  Plan zero = UniformPlan(model, 1, 1, 2, 1, 1, 4);
  zero.zero_stage = 1;
  auto z = Expanded(model, zero, Sparse(false), 1, nullptr);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("zero_stage"), std::string::npos) << z.status();
}

TEST(SparseEmbedding, ALstmsFirstForwardGoesInPartsEachWaitingForItsOwnRows) {
  // EmbRace's per-row priority at 4 parts: an LSTM model's first forward of an iteration runs
  // in 4 parts of its time steps, the changed rows come in 4 lookups by the part that first
  // needs them, and part 0 starts before the last part's rows arrive. No optimizer step, so
  // that the rows are what the next iteration waits for.
  ModelShape shape;
  shape.name = "lstm";
  shape.family = "lstm";
  shape.layers = 2;
  shape.hidden = 256;
  shape.seq_len = 32;
  shape.vocab = 50000;
  shape.tied_embeddings = false;
  const ModelGraph model = *BuildModelGraph(shape);
  GridSpec g;
  g.dp = 2;
  g.micro_batch = 16;
  g.micro_batches = 1;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  const Plan plan = GridPlan(g);
  StepInputs in;
  for (int t = 0; t < 3; ++t) {
    SparseRows r = Rows({3000, 4000, 4000, 3000}, {1600, 2000, 2000, 1600});
    r.parts = 4;
    for (int p = 0; p < 4; ++p) r.stale_parts.insert(r.stale_parts.end(), {400, 500, 500, 400});
    in.Mutable(t).embedding_rows[0] = r;
  }
  TrainSettings train;
  train.optimizer_step = false;
  const roofline::RooflineModel dm(roofline::RooflineParams{});
  auto run = [&](int parts) {
    ExpandOptions o = Sparse(true);
    o.embedding_priority_parts = parts;
    return Expanded(model, plan, o, 3, &in, false, 1e9, &dm, train);
  };
  auto whole = run(1);
  auto parted = run(4);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(parted.ok()) << parted.status();
  const Schedule& s = parted->schedule;
  std::vector<TaskId> forward;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.kind == TaskKind::kCompute && t.phase == Phase::kForward && t.iteration == 1 && t.device == 0 &&
        t.sub_batches == 4) {
      forward.push_back(id);
      EXPECT_EQ(t.first_layer, 0);
      EXPECT_EQ(t.end_layer, 2);  // the embedding and the first LSTM layer; the rest after them, whole
      EXPECT_EQ(s.compute(id).part, LayerPart::kTimeSlice);
    }
  }
  ASSERT_EQ(forward.size(), 4u);
  std::vector<TaskId> lookups;
  for (TaskId l : SparseTasks(s, TaskKind::kCollective, Phase::kForward, 1)) {
    if (s.task(l).sub_batch >= 1) lookups.push_back(l);
  }
  ASSERT_EQ(lookups.size(), 4u);
  EXPECT_EQ(s.task(lookups.back()).sub_batches, 5);
  const auto& start = parted->result.task_start_s;
  const auto& end = parted->result.task_end_s;
  EXPECT_LT(start[static_cast<size_t>(forward.front())], end[static_cast<size_t>(lookups.back())]);
  for (size_t p = 0; p < 4; ++p) EXPECT_GE(start[static_cast<size_t>(forward[p])], end[static_cast<size_t>(lookups[p])]);
  // The forward that waited for every row ends later than the one in parts.
  auto forward_end = [](const Ran& r) {
    double last = 0;
    for (TaskId id = 0; id < static_cast<TaskId>(r.schedule.size()); ++id) {
      const Task& t = r.schedule.task(id);
      if (t.kind == TaskKind::kCompute && t.phase == Phase::kForward && t.iteration == 1 && t.device == 0) {
        last = std::max(last, r.result.task_end_s[static_cast<size_t>(id)]);
      }
    }
    return last;
  };
  EXPECT_LT(forward_end(*parted), forward_end(*whole));
}

TEST(DataAudit, ACommunicationBeforeItsDataIsCaught) {
  // Backward of layers [1, 2) on two devices, and their gradient all-reduce: declared after
  // them it passes; declared without them it starts at 0 and is caught.
  const ModelGraph model = UntiedGpt(1);
  const Cluster cluster = StarCluster(2, 1e9, 0);
  const ConstantDeviceModel dm(kLayer);
  const collectives::Ring ring(collectives::CommTuning{});
  for (bool declared : {true, false}) {
    Schedule s(2);
    ComputeWork w;
    w.first_layer = 1;
    w.end_layer = 2;
    const std::int32_t work = s.AddWork(w);
    std::vector<TaskId> bwd;
    for (DeviceId d : {0, 1}) {
      Task t;
      t.kind = TaskKind::kCompute;
      t.phase = Phase::kBackward;
      t.device = d;
      t.stage = 0;
      t.replica = d;
      t.micro_batch = 0;
      t.first_layer = 1;
      t.end_layer = 2;
      t.work = work;
      bwd.push_back(s.Add(t));
    }
    Task ar;
    ar.kind = TaskKind::kCollective;
    ar.stream = streams::kDataComm;
    ar.op = CollectiveOp::kAllReduce;
    ar.group = s.Group({0, 1});
    ar.first_layer = 1;
    ar.end_layer = 2;
    ar.bytes = 1 << 20;
    s.Add(ar, declared ? bwd : std::vector<TaskId>{});
    auto r = Simulate(s, SimInputs{model, cluster, dm, ring}, SimOptions{});
    ASSERT_TRUE(r.ok()) << r.status();
    auto audit = sim::AuditDataDependencies(s, r->task_start_s, r->task_end_s);
    if (declared) {
      ASSERT_TRUE(audit.ok()) << audit.status();
      EXPECT_EQ(audit->checked, 2);
    } else {
      ASSERT_FALSE(audit.ok());
      EXPECT_NE(audit.status().message().find("allreduce"), std::string::npos) << audit.status();
    }
  }
}

}  // namespace
}  // namespace testbed::testing
