#include "exec/rank_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "exec/executor_stack.h"
#include "exec/gpt_stack.h"
#include "exec/layer_precision.h"
#include "testbed/status_macros.h"
#include "testbed/train/adam.h"
#include "testbed/train/delayed_gradients.h"
#include "testbed/train/loss.h"
#include "testbed/train/sgd.h"

namespace testbed::exec {
namespace {

using Clock = std::chrono::steady_clock;

// The fields of StepMetrics summed over the world, in one all-reduce.
constexpr double StepMetrics::*kSummed[] = {
    &StepMetrics::loss,          &StepMetrics::grad_sq,         &StepMetrics::pipeline_bytes,
    &StepMetrics::data_parallel_bytes, &StepMetrics::tensor_parallel_bytes, &StepMetrics::encode_s,
    &StepMetrics::decode_s,      &StepMetrics::compressed_dense_bytes, &StepMetrics::compressed_wire_bytes,
    &StepMetrics::tensor_parallel_overlapped,
};

}  // namespace

RankRunner::RankRunner(const ExecutorInputs& in, CommGroup& world)
    : s_(in, world), compute_(s_), transfers_(s_, compute_), gradients_(s_) {
  BuildDispatch();
}

void RankRunner::BuildDispatch() {
  auto on = [&](TaskKind kind, CollectiveOp op, std::uint8_t stream, Handler h) {
    dispatch_[{kind, op, stream}] = std::move(h);
  };
  constexpr CollectiveOp kNone = CollectiveOp::kAllReduce;
  on(TaskKind::kCompute, kNone, streams::kCompute, [this](TaskId, const Task& t) { return compute_.Run(t); });
  on(TaskKind::kSend, kNone, streams::kPipelineComm, [this](TaskId, const Task& t) { return transfers_.Send(t); });
  on(TaskKind::kRecv, kNone, streams::kPipelineRecv, [this](TaskId, const Task& t) { return transfers_.Recv(t); });
  on(TaskKind::kSend, kNone, streams::kPipelineCommBack, [this](TaskId, const Task& t) { return transfers_.Send(t); });
  on(TaskKind::kRecv, kNone, streams::kPipelineRecvBack, [this](TaskId, const Task& t) { return transfers_.Recv(t); });
  // Tensor-parallel all-reduces: blocking the compute stream (Megatron-LM) or overlapping it.
  for (std::uint8_t stream : {streams::kCompute, streams::kTensorComm}) {
    on(TaskKind::kCollective, CollectiveOp::kAllReduce, stream,
       [this](TaskId, const Task& t) { return compute_.StartAllReduce(t); });
  }
  on(TaskKind::kCollective, CollectiveOp::kAllReduce, streams::kDataComm,
     [this](TaskId, const Task& t) { return gradients_.Exchange(t); });
  // ZeRO: gradients reduce-scattered into the parts, weights gathered from them; under HSDP
  // the second link class's pieces on their own streams.
  for (std::uint8_t stream : {streams::kDataComm, streams::kDataComm2}) {
    on(TaskKind::kCollective, CollectiveOp::kReduceScatter, stream,
       [this](TaskId, const Task& t) { return gradients_.ReduceScatter(t); });
  }
  on(TaskKind::kCollective, CollectiveOp::kAllGather, streams::kDataComm,
     [this](TaskId, const Task& t) { return gradients_.GatherAll(t); });
  for (std::uint8_t stream : {streams::kParamComm, streams::kParamComm2}) {
    on(TaskKind::kCollective, CollectiveOp::kAllGather, stream,
       [this](TaskId, const Task& t) { return gradients_.GatherLayer(t); });
  }
  on(TaskKind::kKernel, kNone, streams::kCompute, [this](TaskId id, const Task& t) -> absl::Status {
    if (s_.in.schedule.kernel(id).op != KernelOp::kOptimizerStep) {
      return absl::UnimplementedError("a kernel on the compute stream that is not an optimizer step");
    }
    return gradients_.OptimizerStep(t.iteration);
  });
}

const RankRunner::Handler* RankRunner::Find(const Task& t) const {
  const CollectiveOp op = t.kind == TaskKind::kCollective ? t.op : CollectiveOp::kAllReduce;
  auto it = dispatch_.find({t.kind, op, t.stream});
  return it == dispatch_.end() ? nullptr : &it->second;
}

absl::Status RankRunner::CheckHandled() const {
  // Every rank checks every task, so all reach the same verdict before any of them waits on
  // another.
  for (TaskId id = 0; id < static_cast<TaskId>(s_.in.schedule.size()); ++id) {
    const Task& t = s_.in.schedule.task(id);
    if (Find(t) != nullptr) continue;
    return absl::UnimplementedError(absl::StrCat(
        s_.in.schedule.Describe(id), ": the executor has no handler for a ", TaskKindName(t.kind),
        t.kind == TaskKind::kCollective ? absl::StrCat(" ", CollectiveOpName(t.op)) : "", " task on the ",
        streams::Name(t.stream), " stream (it runs compute, stage-to-stage transfers, tensor-parallel all-reduces, "
                                 "data-parallel gradient all-reduces, ZeRO's reduce-scatters and all-gathers and optimizer steps)"));
  }
  return absl::OkStatus();
}

absl::Status RankRunner::Run(TaskId id) {
  const Task& t = s_.in.schedule.task(id);
  absl::Status st = (*Find(t))(id, t);
  compute_.Tick();
  return st;
}

absl::Status RankRunner::Setup() {
  const Plan& plan = s_.in.plan;
  s_.rank = s_.world.rank();
  TESTBED_RETURN_IF_ERROR(CheckHandled());
  const auto grid = plan.Uniform();
  if (!grid) {
    return absl::UnimplementedError("real execution runs plans whose stages all have the same tensor-parallel degree, "
                                    "replica count and micro-batches per replica");
  }
  for (const LayerSetting& ls : plan.layers) {
    // Per-layer precision runs (layer_precision.h); a per-layer tensor-parallel degree does not.
    if (ls.tp != 0) return absl::UnimplementedError("real execution runs without per-layer tensor-parallel degrees");
  }
  s_.tp = grid->tp;
  s_.pp = grid->pp;
  s_.dp = grid->dp;
  s_.micro_batches = grid->micro_batches;
  s_.chunks = plan.virtual_stages();
  if (s_.world.size() != plan.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("the plan needs ", plan.num_devices(), " ranks; the world has ",
                                                   s_.world.size()));
  }
  bool found = false;
  for (int d = 0; d < s_.dp && !found; ++d) {
    for (int st = 0; st < s_.pp && !found; ++st) {
      for (int t = 0; t < s_.tp && !found; ++t) {
        if (plan.DeviceOf(d, st, t) == s_.rank) {
          s_.dp_rank = d;
          s_.stage = st;
          s_.tp_rank = t;
          found = true;
        }
      }
    }
  }
  if (!found) return absl::InvalidArgumentError(absl::StrCat("rank ", s_.rank, " has no place in the plan"));
  // Sub-groups: every group of the schedule this rank belongs to, created in index order by
  // all its members.
  const auto& groups = s_.in.schedule.groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& members = groups[g];
    if (members.size() < 2 || std::find(members.begin(), members.end(), s_.rank) == members.end()) continue;
    std::vector<int> ranks(members.begin(), members.end());
    TESTBED_ASSIGN_OR_RETURN(s_.groups[static_cast<std::int32_t>(g)], s_.world.NewGroup(ranks));
  }
  // The tensor-parallel group, for a split layer that reduces inside (one task of several layers).
  CommGroup* tp_group = nullptr;
  std::unique_ptr<CommGroup> own_tp_group;
  if (s_.tp > 1) {
    std::vector<DeviceId> tp_members;
    for (int t = 0; t < s_.tp; ++t) tp_members.push_back(plan.DeviceOf(s_.dp_rank, s_.stage, t));
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g] == tp_members) tp_group = s_.Group(static_cast<std::int32_t>(g));
    }
    if (tp_group == nullptr) {
      std::vector<int> ranks(tp_members.begin(), tp_members.end());
      TESTBED_ASSIGN_OR_RETURN(own_tp_group, s_.world.NewGroup(ranks));
      tp_group = own_tp_group.get();
      s_.groups[-1] = std::move(own_tp_group);
    }
  }
  TESTBED_RETURN_IF_ERROR(transfers_.Setup());
  TESTBED_RETURN_IF_ERROR(CheckExecutorLayout(s_.in.model.shape, s_.tp, s_.pp));
  TESTBED_ASSIGN_OR_RETURN(train::SequentialModel<float> full, BuildExecutorStack(s_.in.model, s_.in.seed));
  AllReduceFn<float> reduce = nullptr;
  if (tp_group != nullptr) {
    reduce = [this, tp_group](Tensor& m) {
      s_.metrics.tensor_parallel_bytes += static_cast<double>(m.size()) * sizeof(float);
      return tp_group->AllReduce(std::span<float>(m.data(), static_cast<size_t>(m.size())), ReduceOp::kSum);
    };
  }
  s_.model = ShardGptStack(full, s_.tp_rank, s_.tp, reduce);
  TESTBED_RETURN_IF_ERROR(ApplyLayerPrecision(plan, s_.in.seed, s_.rank, s_.model));
  for (int c = 0; c < s_.chunks; ++c) {
    const StageSpec& st = plan.Chunk(s_.stage, c);
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      for (train::Param<float>* p : s_.model.layer(l).Params()) s_.params.push_back(p);
    }
  }
  if (plan.zero_stage >= 1 && s_.dp > 1) {
    // The replicas holding this rank's model shard, as the schedule's ZeRO tasks name them.
    std::vector<DeviceId> members;
    for (int d = 0; d < s_.dp; ++d) members.push_back(plan.DeviceOf(d, s_.stage, s_.tp_rank));
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g] == members) s_.dp_group = s_.Group(static_cast<std::int32_t>(g));
    }
    if (s_.dp_group == nullptr) return absl::InternalError("zero_stage > 0 but the schedule has no data-parallel group");
    std::vector<int> held;
    for (int c = 0; c < s_.chunks; ++c) {
      const StageSpec& st = plan.Chunk(s_.stage, c);
      for (int l = st.first_layer; l < st.end_layer; ++l) held.push_back(l);
    }
    s_.shards.Build(s_.model, held, s_.dp, s_.dp_rank, plan.param_links.shares);
  }
  if (s_.in.train.optimizer == "adam") {
    train::AdamOptions o;
    o.learning_rate = s_.in.train.learning_rate;
    s_.optimizer = std::make_unique<train::Adam<float>>(o);
  } else {
    s_.optimizer =
        std::make_unique<train::Sgd<float>>(train::SgdOptions{s_.in.train.learning_rate, s_.in.sgd_momentum, 0.0});
  }
  if (s_.in.delay.max_delay > 0) s_.delayed = std::make_unique<train::DelayedGradients<float>>(s_.in.delay);
  TESTBED_RETURN_IF_ERROR(SetupOverlap());
  TESTBED_ASSIGN_OR_RETURN(const std::vector<TaskId> order, s_.in.schedule.ExecutionOrder());
  for (TaskId id : order) {
    for (DeviceId d : s_.in.schedule.DevicesOf(id)) {
      if (d == s_.rank) {
        tasks_.push_back(id);
        break;
      }
    }
  }
  s_.hidden = s_.in.model.shape.hidden;
  return absl::OkStatus();
}

absl::Status RankRunner::SetupOverlap() {
  const Schedule& schedule = s_.in.schedule;
  s_.overlapping = schedule.overlapping_iterations();
  if (!s_.overlapping) return absl::OkStatus();
  // What the weight versions do not cover yet is refused rather than run wrong.
  if (s_.tp > 1) {
    return absl::UnimplementedError("a pipeline without a flush (PipeDream-2BW) runs for real at tp = 1");
  }
  if (s_.in.plan.zero_stage > 0) {
    return absl::UnimplementedError("a pipeline without a flush (PipeDream-2BW) runs for real without ZeRO sharding");
  }
  if (s_.delayed != nullptr) {
    return absl::InvalidArgumentError(
        "a pipeline without a flush (PipeDream-2BW) already applies each gradient one step late; "
        "[real] delay must be 0");
  }
  if (schedule.iterations() != s_.in.train.steps) {
    return absl::InvalidArgumentError(absl::StrCat("the schedule's iterations overlap, so it must cover all ",
                                                   s_.in.train.steps, " steps; it covers ", schedule.iterations()));
  }
  s_.versions.Setup(s_.params, schedule.weight_versions());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepRecord>> RankRunner::RunWhole(std::vector<TaskTime>* times) {
  const int iterations = s_.in.schedule.iterations();
  s_.loss_of.assign(static_cast<size_t>(iterations), 0.0);
  s_.grad_sq_of.assign(static_cast<size_t>(iterations), 0.0);
  s_.metrics = StepMetrics{};
  TESTBED_ASSIGN_OR_RETURN(const Batch* first, s_.DataOf(0));
  s_.seq = first->rows_per_sample;
  TESTBED_ASSIGN_OR_RETURN(const double wall, RunTasks(times));
  // Per iteration: loss and squared gradient norm summed over the world; traffic and time
  // per iteration on average.
  std::vector<double> sums = s_.loss_of;
  sums.insert(sums.end(), s_.grad_sq_of.begin(), s_.grad_sq_of.end());
  for (double StepMetrics::*f : kSummed) sums.push_back(s_.metrics.*f / iterations);
  TESTBED_RETURN_IF_ERROR(s_.world.AllReduce(sums.data(), sums.data(), sums.size(), DataType::kFloat64, ReduceOp::kSum));
  double weights = 0;
  for (const train::Param<float>* p : s_.params) weights += static_cast<double>(p->value.size()) * sizeof(float);
  double peaks[4] = {wall, static_cast<double>(s_.versions.peak_stash_bytes()),
                     static_cast<double>(s_.versions.peak_held_gradient_bytes()), weights};
  TESTBED_RETURN_IF_ERROR(s_.world.AllReduce(peaks, peaks, 4, DataType::kFloat64, ReduceOp::kMax));
  const size_t n = static_cast<size_t>(iterations);
  for (size_t i = 0; i < std::size(kSummed); ++i) totals_.*kSummed[i] = sums[2 * n + i];
  totals_.peak_stash_bytes = peaks[1];
  totals_.peak_held_gradient_bytes = peaks[2];
  totals_.weight_bytes = peaks[3];
  std::vector<StepRecord> records;
  for (size_t i = 0; i < n; ++i) {
    // Iteration i's gradient is applied after iteration i + 1: a step applies the gradient of
    // the step before it (none at the first).
    records.push_back(StepRecord{sums[i], std::sqrt(sums[n + i]), peaks[0] / iterations, i == 0 ? -1 : 1});
  }
  return records;
}

absl::StatusOr<double> RankRunner::RunTasks(std::vector<TaskTime>* times) {
  const auto t0 = Clock::now();
  for (TaskId id : tasks_) {
    const auto ts = Clock::now();
    absl::Status st = Run(id);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat(s_.in.schedule.Describe(id), ": ", st.message()));
    if (times != nullptr) {
      times->push_back(TaskTime{id, s_.rank, std::chrono::duration<double>(ts - t0).count(),
                                std::chrono::duration<double>(Clock::now() - t0).count()});
    }
  }
  TESTBED_RETURN_IF_ERROR(compute_.Drain());
  TESTBED_RETURN_IF_ERROR(transfers_.Finish());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

absl::Status RankRunner::Evaluate(ExecutionResult& out) {
  // ZeRO-3 gathers weights only for a use the schedule has: the trained model, whole, first.
  if (s_.shards.active() && s_.in.plan.zero_stage >= 3) TESTBED_RETURN_IF_ERROR(s_.shards.GatherAll(*s_.dp_group));
  if (s_.rank != 0 || s_.tp != 1 || s_.pp != 1) return absl::OkStatus();
  // The loss and accuracy of the trained model on a whole data set.
  auto evaluate = [this](const std::function<absl::StatusOr<Batch>()>& data, double& loss,
                         double& accuracy) -> absl::Status {
    if (!data) return absl::OkStatus();
    TESTBED_ASSIGN_OR_RETURN(Batch b, data());
    // In blocks of samples, so that a large data set's activations need not fit at once; the
    // per-row means of the blocks are weighted by their rows.
    constexpr Eigen::Index kSamplesPerBlock = 512;
    const Eigen::Index rows = b.inputs.rows(), per = kSamplesPerBlock * b.rows_per_sample;
    if (rows == 0) return absl::InvalidArgumentError("an evaluation data set without samples");
    double loss_sum = 0, correct = 0;
    for (Eigen::Index first = 0; first < rows; first += per) {
      const Eigen::Index n = std::min(per, rows - first);
      const Tensor inputs = b.inputs.middleRows(first, n);
      const std::vector<std::int64_t> targets(b.targets.begin() + first, b.targets.begin() + first + n);
      std::vector<train::LayerCache<float>> caches;
      TESTBED_ASSIGN_OR_RETURN(Tensor logits, s_.model.Forward(inputs, caches));
      TESTBED_ASSIGN_OR_RETURN(auto lg, train::ClassificationLoss<float>(s_.in.loss, logits, targets));
      loss_sum += lg.loss * static_cast<double>(n);
      correct += train::Accuracy<float>(logits, targets) * static_cast<double>(n);
    }
    loss = loss_sum / static_cast<double>(rows);
    accuracy = correct / static_cast<double>(rows);
    return absl::OkStatus();
  };
  TESTBED_RETURN_IF_ERROR(evaluate(s_.in.validation, out.validation_loss, out.validation_accuracy));
  return evaluate(s_.in.training_set, out.train_set_loss, out.train_set_accuracy);
}

absl::StatusOr<StepRecord> RankRunner::Step(std::int64_t step, std::vector<TaskTime>* times) {
  const Plan& plan = s_.in.plan;
  const std::int64_t global = plan.micro_batch * s_.micro_batches * s_.dp;
  TESTBED_ASSIGN_OR_RETURN(s_.data, s_.in.data(step, global));
  s_.seq = s_.data.rows_per_sample;
  s_.metrics = StepMetrics{};
  TESTBED_ASSIGN_OR_RETURN(const double wall, RunTasks(times));
  // Loss, gradient norm and traffic over the world; the slowest rank's time.
  double sums[std::size(kSummed)];
  for (size_t i = 0; i < std::size(kSummed); ++i) sums[i] = s_.metrics.*kSummed[i];
  TESTBED_RETURN_IF_ERROR(s_.world.AllReduce(sums, sums, std::size(kSummed), DataType::kFloat64, ReduceOp::kSum));
  double slowest = wall;
  TESTBED_RETURN_IF_ERROR(s_.world.AllReduce(&slowest, &slowest, 1, DataType::kFloat64, ReduceOp::kMax));
  for (size_t i = 0; i < std::size(kSummed); ++i) totals_.*kSummed[i] = sums[i];
  return StepRecord{totals_.loss, std::sqrt(totals_.grad_sq), slowest, s_.applied_delay};
}

}  // namespace testbed::exec
