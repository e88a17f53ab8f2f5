#include "expand/expansion.h"
#include "expand/sparse_embedding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::expand {

Expansion::~Expansion() = default;

Expansion::Expansion(const SchedulingContext& c, const ExpandOptions& o)
    : ctx(c), opt(o), plan(c.plan), model(c.model), sched(c.cluster.num_devices()),
      param_gathers(std::make_unique<ParameterGathers>()) {
  pp = plan.pp();
  chunks = plan.virtual_stages();
  iterations = std::max(1, c.iterations);
  elem = BytesPerElement(StoragePrecision(c.train.precision));
}

const StepInput& Expansion::Inputs(int iteration) const {
  static const StepInput kNone;
  return ctx.inputs == nullptr ? kNone : ctx.inputs->At(iteration);
}

double Expansion::GradientElementBytes(int layer) const {
  const int bits = plan.LayerBits(layer).gradient_bits;
  return bits > 0 ? bits / 8.0 : elem;
}

double Expansion::WeightElementBytes(int layer) const {
  const int bits = plan.LayerBits(layer).weight_bits;
  return bits > 0 ? bits / 8.0 : elem;
}

Precision Expansion::LayerPrecisionOf(int layer) const {
  return PrecisionOfBits(plan.LayerBits(layer).activation_bits, ctx.train.precision);
}

bool Expansion::ExpertParallel(int layer) const {
  const Layer& l = model.layers[static_cast<size_t>(layer)];
  return l.kind == LayerKind::kMoe && l.experts > 0 && plan.experts.degree > 1;
}

double Expansion::ReplicatedParams(int layer) const {
  const Layer& l = model.layers[static_cast<size_t>(layer)];
  double params = static_cast<double>(l.params + (pp > 1 ? l.shared_params : 0));
  if (ExpertParallel(layer)) params -= static_cast<double>(l.experts * l.expert_params);
  return params / plan.LayerTp(layer);
}

double Expansion::OwnedParams(int s, int replica) const {
  double params = StageParams(plan, model, s);
  // Sparse embedding communication: a replica owns 1/dp of the table's rows.
  if (s == 0 && SparseEmbedding(*this, 0)) params -= static_cast<double>(model.layers.front().params) * (1.0 - 1.0 / plan.dp(0));
  const int ep = plan.experts.degree;
  if (ep < 2) return params;
  const int rank = replica % ep;
  for (const StageSpec& c : StageAt(s).chunks) {
    for (int l = c.first_layer; l < c.end_layer; ++l) {
      if (!ExpertParallel(l)) continue;
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      const ExpertPlacement p = plan.PlacementOf(l, layer.experts);
      const auto owned = std::count(p.owner.begin(), p.owner.end(), rank);
      params -= static_cast<double>((layer.experts - owned) * layer.expert_params);
    }
  }
  return params;
}

double Expansion::CopiedExpertParams(int s, int replica) const {
  const int ep = plan.experts.degree;
  if (ep < 2) return 0;
  const int rank = replica % ep;
  double params = 0;
  for (const StageSpec& c : StageAt(s).chunks) {
    for (int l = c.first_layer; l < c.end_layer; ++l) {
      if (!ExpertParallel(l)) continue;
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      const ExpertPlacement p = plan.PlacementOf(l, layer.experts);
      for (const auto& copies : p.replicas) {
        if (std::find(copies.begin(), copies.end(), rank) != copies.end()) params += static_cast<double>(layer.expert_params);
      }
    }
  }
  return params;
}

bool Expansion::Compressed(int layer) const {
  const GradientCompression* gc = ctx.compression;
  return gc != nullptr && gc->compressor != nullptr &&
         (!gc->embedding_only || model.layers[static_cast<size_t>(layer)].kind == LayerKind::kEmbedding);
}

size_t Expansion::WorkKeyHash::operator()(const WorkKey& k) const noexcept {
  std::uint32_t fb, sb;
  std::memcpy(&fb, &k.fraction, sizeof fb);
  std::memcpy(&sb, &k.time_share, sizeof sb);
  std::uint64_t h = static_cast<std::uint64_t>(k.first) * 1000003u ^ static_cast<std::uint64_t>(k.end) * 7919u ^
                    static_cast<std::uint64_t>(k.tp) * 131u ^ static_cast<std::uint64_t>(k.micro_batch) * 104729u ^
                    (static_cast<std::uint64_t>(fb) << 21) ^ (static_cast<std::uint64_t>(k.precision) << 11) ^
                    (static_cast<std::uint64_t>(k.part) << 7) ^ (static_cast<std::uint64_t>(k.selective) << 5) ^
                    static_cast<std::uint64_t>(k.expert_tokens * 4099.0) ^ (static_cast<std::uint64_t>(sb) << 29);
  return static_cast<size_t>(h);
}

size_t Expansion::TransferKeyHash::operator()(const TransferKey& k) const noexcept {
  std::uint64_t h = static_cast<std::uint64_t>(k.iteration);
  for (std::int32_t v : {k.chunk, k.replica, k.tp_rank, k.micro_batch, k.backward}) {
    h = h * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(static_cast<std::uint32_t>(v));
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

void Expansion::MeetTransfer(const TransferKey& key, TaskId task, bool is_recv) {
  auto [it, fresh] = unmatched.try_emplace(key, task, is_recv);
  if (fresh) return;
  const auto [other, other_is_recv] = it->second;
  unmatched.erase(it);
  if (other_is_recv == is_recv) {
    // Two sends (or receives) for one slot: left for LinkTransfers to report.
    duplicate_transfer = task;
    return;
  }
  if (is_recv) {
    sched.Link(task, other);
  } else {
    sched.Link(other, task);
  }
}

std::int32_t Expansion::TpGroup(int replica, int stage, int first, int degree) {
  const int tp = plan.tp(stage);
  if (degree <= 0) degree = tp;
  std::int32_t* cached = nullptr;
  if (first == 0 && degree == tp) {
    cached = &full_tp_group_[static_cast<size_t>(stage)][static_cast<size_t>(replica)];
  } else {
    const std::uint64_t key = (static_cast<std::uint64_t>(replica) << 40) ^ (static_cast<std::uint64_t>(stage) << 24) ^
                              (static_cast<std::uint64_t>(first) << 12) ^ static_cast<std::uint64_t>(degree);
    cached = &sub_tp_group_.try_emplace(key, -1).first->second;
  }
  if (*cached >= 0) return *cached;
  std::vector<DeviceId> g;
  g.reserve(static_cast<size_t>(degree));
  for (int t = first; t < first + degree; ++t) g.push_back(Dev(replica, stage, t));
  *cached = sched.Group(g);
  return *cached;
}

const std::vector<PipelineOp>& Expansion::OpsOf(int stage, int replica) const {
  return ops_[static_cast<size_t>(stage)][static_cast<size_t>(replica)];
}

double Expansion::Fraction(int stage, int replica, int micro_batch) const {
  const auto& f = fractions_[static_cast<size_t>(stage)][static_cast<size_t>(replica)];
  const double slice = f.empty() ? 1.0 : f[static_cast<size_t>(micro_batch)];
  return slice / static_cast<double>(std::max(1, plan.cp()));
}

std::int32_t Expansion::CpGroup(int replica, int stage, int t) {
  const int cp = plan.cp();
  const int lead = replica - replica % cp;
  const std::uint64_t key = (static_cast<std::uint64_t>(lead) << 40) ^ (static_cast<std::uint64_t>(stage) << 20) ^
                            static_cast<std::uint64_t>(t);
  auto [it, fresh] = cp_group_.try_emplace(key, -1);
  if (!fresh) return it->second;
  std::vector<DeviceId> g;
  g.reserve(static_cast<size_t>(cp));
  for (int r = lead; r < lead + cp; ++r) g.push_back(Dev(r, stage, t));
  it->second = sched.Group(g);
  return it->second;
}

std::int64_t Expansion::GlobalMicroBatch(int stage, int replica, int micro_batch) const {
  return offsets_[static_cast<size_t>(stage)][static_cast<size_t>(replica)] + micro_batch;
}

std::pair<int, int> Expansion::Locate(int stage, std::int64_t g) const {
  const auto& off = offsets_[static_cast<size_t>(stage)];
  const auto it = std::upper_bound(off.begin(), off.end(), g);
  const int r = static_cast<int>(it - off.begin()) - 1;
  return {r, static_cast<int>(g - off[static_cast<size_t>(r)])};
}

bool Expansion::IsFinalBackward(int stage, int replica, size_t k) const {
  return final_backward_[static_cast<size_t>(stage)][static_cast<size_t>(replica)][k] != 0;
}

void Expansion::RecordFinalBackward(int iteration, DeviceId device, int layer, TaskId task) {
  const int local = local_layer_[static_cast<size_t>(stage_of_device_[static_cast<size_t>(device)])][static_cast<size_t>(layer)];
  if (local < 0) return;
  final_bwd_[static_cast<size_t>(iteration)][static_cast<size_t>(device)][static_cast<size_t>(local)] = task;
}

void Expansion::RecordForward(int iteration, DeviceId device, int layer, TaskId task) {
  if (first_fwd_.empty()) return;
  const int s = stage_of_device_[static_cast<size_t>(device)];
  if (s < 0) return;
  const int local = local_layer_[static_cast<size_t>(s)][static_cast<size_t>(layer)];
  if (local < 0) return;
  TaskId& slot = first_fwd_[static_cast<size_t>(iteration)][static_cast<size_t>(device)][static_cast<size_t>(local)];
  if (slot < 0) slot = task;
}

TaskId Expansion::FirstForward(int iteration, DeviceId device, int layer) const {
  if (first_fwd_.empty() || iteration >= iterations) return -1;
  const int s = stage_of_device_[static_cast<size_t>(device)];
  if (s < 0) return -1;
  const int local = local_layer_[static_cast<size_t>(s)][static_cast<size_t>(layer)];
  if (local < 0) return -1;
  return first_fwd_[static_cast<size_t>(iteration)][static_cast<size_t>(device)][static_cast<size_t>(local)];
}

TaskId Expansion::FinalBackward(int iteration, DeviceId device, int layer) const {
  const int s = stage_of_device_[static_cast<size_t>(device)];
  if (s < 0) return -1;
  const int local = local_layer_[static_cast<size_t>(s)][static_cast<size_t>(layer)];
  if (local < 0) return -1;
  return final_bwd_[static_cast<size_t>(iteration)][static_cast<size_t>(device)][static_cast<size_t>(local)];
}

absl::Status Expansion::PrepareOps(const ProgramSource& programs) {
  std::map<std::int64_t, PipelineProgram> made;
  const bool steps = opt.optimizer_step && ctx.train.optimizer_step;
  ops_.assign(static_cast<size_t>(pp), {});
  program_micro_batches_.assign(static_cast<size_t>(pp), {});
  final_backward_.assign(static_cast<size_t>(pp), {});
  fractions_.assign(static_cast<size_t>(pp), {});
  for (int s = 0; s < pp; ++s) {
    const Stage& st = StageAt(s);
    for (int r = 0; r < st.dp(); ++r) {
      const std::int64_t m = st.replicas[static_cast<size_t>(r)].micro_batches;
      auto it = made.find(m);
      if (it == made.end()) {
        absl::StatusOr<PipelineProgram> p = programs(static_cast<int>(m));
        if (!p.ok()) return p.status();
        // A slicer's program counts each slice as a micro-batch of its own.
        TESTBED_RETURN_IF_ERROR(CheckProgram(*p, pp, chunks, p->NumMicroBatches(), iterations));
        it = made.emplace(m, std::move(*p)).first;
      }
      const PipelineProgram& prog = it->second;
      program_micro_batches_[static_cast<size_t>(s)].push_back(prog.NumMicroBatches());
      weight_versions = std::max(weight_versions, prog.weight_versions);
      p2p_by_direction = p2p_by_direction || prog.p2p_by_direction;
      std::vector<PipelineOp> ops;
      const auto& row = prog.stages[static_cast<size_t>(s)];
      if (prog.spans_iterations) {
        overlapping_iterations = true;
        for (const PipelineOp& op : row) {
          if (op.kind == PipelineOp::Kind::kOptimizerStep && !steps) continue;
          ops.push_back(op);
        }
      } else {
        ops.reserve(row.size() * static_cast<size_t>(iterations) + static_cast<size_t>(iterations));
        for (int i = 0; i < iterations; ++i) {
          for (PipelineOp op : row) {
            op.iteration = i;
            ops.push_back(op);
          }
          if (steps) {
            PipelineOp step;
            step.kind = PipelineOp::Kind::kOptimizerStep;
            step.iteration = i;
            ops.push_back(step);
          }
        }
      }
      // The last backward of each (iteration, chunk) makes its gradients final.
      std::vector<char> final(ops.size(), 0);
      std::map<std::pair<int, int>, size_t> last;
      for (size_t k = 0; k < ops.size(); ++k) {
        if (ops[k].kind == PipelineOp::Kind::kBackward) last[{ops[k].iteration, ops[k].chunk}] = k;
      }
      for (const auto& [key, k] : last) final[k] = 1;
      ops_[static_cast<size_t>(s)].push_back(std::move(ops));
      final_backward_[static_cast<size_t>(s)].push_back(std::move(final));
      std::vector<double> fr;
      if (!prog.micro_batch_fraction.empty()) fr = prog.micro_batch_fraction;
      fractions_[static_cast<size_t>(s)].push_back(std::move(fr));
    }
  }
  offsets_.assign(static_cast<size_t>(pp), {});
  for (int s = 0; s < pp; ++s) {
    std::int64_t next = 0;
    for (int count : program_micro_batches_[static_cast<size_t>(s)]) {
      offsets_[static_cast<size_t>(s)].push_back(next);
      next += count;
    }
  }
  // Layer and device indexing for the final-backward table.
  local_layer_.assign(static_cast<size_t>(pp), std::vector<int>(model.layers.size(), -1));
  std::vector<int> layers_of_stage(static_cast<size_t>(pp), 0);
  for (int s = 0; s < pp; ++s) {
    int n = 0;
    for (const StageSpec& c : StageAt(s).chunks) {
      for (int l = c.first_layer; l < c.end_layer; ++l) local_layer_[static_cast<size_t>(s)][static_cast<size_t>(l)] = n++;
    }
    layers_of_stage[static_cast<size_t>(s)] = n;
  }
  stage_of_device_.assign(static_cast<size_t>(sched.num_devices()), -1);
  for (int s = 0; s < pp; ++s) {
    for (const StageReplica& r : StageAt(s).replicas) {
      for (DeviceId d : r.devices) stage_of_device_[static_cast<size_t>(d)] = s;
    }
  }
  first_compute_.assign(static_cast<size_t>(iterations), std::vector<TaskId>(static_cast<size_t>(sched.num_devices()), -1));
  full_tp_group_.assign(static_cast<size_t>(pp), {});
  for (int s = 0; s < pp; ++s) full_tp_group_[static_cast<size_t>(s)].assign(static_cast<size_t>(plan.dp(s)), -1);
  final_bwd_.assign(static_cast<size_t>(iterations), {});
  for (auto& per_device : final_bwd_) {
    per_device.resize(static_cast<size_t>(sched.num_devices()));
    for (size_t d = 0; d < per_device.size(); ++d) {
      const int s = stage_of_device_[d];
      if (s >= 0) per_device[d].assign(static_cast<size_t>(layers_of_stage[static_cast<size_t>(s)]), -1);
    }
  }
  if (opt.param_gather_overlap && plan.zero_stage >= 1 && iterations > 1) first_fwd_ = final_bwd_;  // all -1
  return absl::OkStatus();
}

namespace {

absl::StatusOr<Schedule> Expand(const SchedulingContext& ctx, const ProgramSource& programs,
                                const ExpandOptions& options) {
  TESTBED_RETURN_IF_ERROR(ctx.plan.Validate(static_cast<int>(ctx.model.layers.size()), ctx.cluster));
  if (options.tp_chunks < 1) return absl::InvalidArgumentError("tp_chunks must be >= 1");
  Expansion e(ctx, options);
  TESTBED_RETURN_IF_ERROR(e.PrepareOps(programs));
  TESTBED_RETURN_IF_ERROR(CheckParameterSharding(e));
  TESTBED_RETURN_IF_ERROR(CheckSparseEmbedding(e));
  if (options.split_backward && ctx.plan.zero_stage >= 3) {
    return absl::UnimplementedError("a backward split into input and weight gradients (split_backward) runs without "
                                    "ZeRO-3's per-layer weight gathers");
  }
  TESTBED_RETURN_IF_ERROR(PlanBuckets(e));
  TESTBED_RETURN_IF_ERROR(ComputePass(e));
  TESTBED_RETURN_IF_ERROR(LinkTransfers(e));
  TESTBED_RETURN_IF_ERROR(GradientSyncPass(e));
  TESTBED_RETURN_IF_ERROR(SparseEmbeddingPass(e));
  TESTBED_RETURN_IF_ERROR(OptimizerPass(e));
  e.sched.SetOverlappingIterations(e.overlapping_iterations, e.weight_versions);
  const bool ranked = std::any_of(options.stream_priority.begin(), options.stream_priority.end(),
                                  [](std::uint8_t p) { return p != 0; });
  for (TaskId id = 0; ranked && id < static_cast<TaskId>(e.sched.size()); ++id) {
    const Task& t = e.sched.task(id);
    if (t.kind == TaskKind::kCompute || t.kind == TaskKind::kKernel) continue;
    const std::uint8_t p = options.stream_priority[t.kind == TaskKind::kRecv && t.match >= 0 ? e.sched.task(t.match).stream : t.stream];
    if (p != 0) e.sched.SetPriority(id, p);
  }
  return std::move(e.sched);
}

}  // namespace

Task LaneTask(const Lane& lane, TaskKind kind, std::uint8_t stream, Phase phase) {
  Task t;
  t.kind = kind;
  t.stream = stream;
  t.phase = phase;
  t.stage = lane.stage;
  t.chunk = lane.chunk;
  t.replica = lane.replica;
  t.micro_batch = lane.micro_batch;
  t.iteration = lane.iteration;
  t.fraction = lane.fraction;
  return t;
}

Task GroupTask(CollectiveOp op, std::uint8_t stream, std::int32_t group, int stage, int first, int end,
               std::int64_t bytes, Phase phase) {
  Task t;
  t.kind = TaskKind::kCollective;
  t.op = op;
  t.stream = stream;
  t.phase = phase;
  t.group = group;
  t.stage = stage;
  t.first_layer = first;
  t.end_layer = end;
  t.bytes = bytes;
  return t;
}

}  // namespace testbed::expand

namespace testbed {

absl::StatusOr<Schedule> ExpandPipeline(const SchedulingContext& ctx, const ProgramSource& programs,
                                        const ExpandOptions& options) {
  return expand::Expand(ctx, programs, options);
}

absl::StatusOr<Schedule> ExpandPipeline(const SchedulingContext& ctx, const PipelineProgram& program,
                                        const ExpandOptions& options) {
  const int m = program.NumMicroBatches();
  // One program for every replica; a plan whose replicas run different counts needs a program
  // per count (the other form).
  ProgramSource one = [&ctx, &program, m](int micro_batches) -> absl::StatusOr<PipelineProgram> {
    if (!ctx.plan.Uniform()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the schedule's program runs ", m, " micro-batches for every replica, but the plan's replicas run "
          "different counts (a replica runs ", micro_batches, "): schedule it with a program per count"));
    }
    return program;
  };
  return expand::Expand(ctx, one, options);
}

}  // namespace testbed
