#include "testbed/pipeline_program.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed {

int PipelineProgram::NumMicroBatches() const {
  int n = 0;
  for (const auto& ops : stages) {
    for (const PipelineOp& op : ops) n = std::max(n, op.micro_batch + 1);
  }
  return n;
}

std::vector<ParamSpec> ExpandOptionParams() {
  return {
      ParamSpec::Int("tp_chunks", 1).Range(1, 16).Doc("split each layer's compute so its tensor-parallel collective overlaps the next part"),
      ParamSpec::Bool("tp_overlap", false).Doc("tensor-parallel collectives on their own stream instead of blocking compute"),
      ParamSpec::Double("dp_bucket_mib", 25.0).Min(0.001).Unit("MiB").Doc("gradient all-reduce bucket size"),
      ParamSpec::Bool("dp_overlap", true).Doc("start gradient buckets during the backward pass"),
      ParamSpec::Bool("recompute_after_gradient", false)
          .Doc("recompute a checkpointed micro-batch only once its gradient has arrived (Megatron-LM, DeepSpeed)"),
  };
}

absl::StatusOr<ExpandOptions> ExpandOptionsFrom(const ParamSet& params) {
  ExpandOptions o;
  TESTBED_ASSIGN_OR_RETURN(std::int64_t chunks, params.Get<std::int64_t>("tp_chunks"));
  o.tp_chunks = static_cast<int>(chunks);
  TESTBED_ASSIGN_OR_RETURN(o.tp_overlap, params.Get<bool>("tp_overlap"));
  TESTBED_ASSIGN_OR_RETURN(double mib, params.Get<double>("dp_bucket_mib"));
  o.dp_bucket_bytes = static_cast<std::int64_t>(mib * 1048576.0);
  TESTBED_ASSIGN_OR_RETURN(o.dp_overlap, params.Get<bool>("dp_overlap"));
  // Read leniently: schedulers that declare their own subset of these parameters keep working.
  o.recompute_after_gradient = params.GetOr<bool>("recompute_after_gradient", false);
  if (o.tp_chunks > 1) o.tp_overlap = true;  // chunks exist to overlap
  return o;
}

PipelineProgram GPipeProgram(int pp, int m) {
  PipelineProgram p;
  p.stages.resize(static_cast<size_t>(pp));
  for (auto& ops : p.stages) {
    for (int i = 0; i < m; ++i) ops.push_back({PipelineOp::Kind::kForward, 0, i});
    for (int i = m - 1; i >= 0; --i) ops.push_back({PipelineOp::Kind::kBackward, 0, i});
  }
  return p;
}

PipelineProgram OneFOneBProgram(int pp, int m) {
  PipelineProgram p;
  p.stages.resize(static_cast<size_t>(pp));
  for (int s = 0; s < pp; ++s) {
    auto& ops = p.stages[static_cast<size_t>(s)];
    const int warmup = std::min(pp - s - 1, m);
    for (int i = 0; i < warmup; ++i) ops.push_back({PipelineOp::Kind::kForward, 0, i});
    for (int i = 0; i < m - warmup; ++i) {
      ops.push_back({PipelineOp::Kind::kForward, 0, warmup + i});
      ops.push_back({PipelineOp::Kind::kBackward, 0, i});
    }
    for (int i = m - warmup; i < m; ++i) ops.push_back({PipelineOp::Kind::kBackward, 0, i});
  }
  return p;
}

absl::StatusOr<PipelineProgram> InterleavedProgram(int pp, int chunks, int m) {
  if (chunks < 2) return absl::InvalidArgumentError("interleaved 1F1B needs at least 2 model chunks per stage");
  if (m % pp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("interleaved 1F1B needs the micro-batch count (", m,
                                                   ") to be a multiple of the pipeline depth (", pp, ")"));
  }
  PipelineProgram p;
  p.stages.resize(static_cast<size_t>(pp));
  const int total = m * chunks;
  // Megatron-LM: virtual micro-batch k runs chunk (k / pp) % chunks of micro-batch
  // (k / (pp * chunks)) * pp + k % pp; backwards visit the chunks in reverse.
  auto mb_of = [&](int k) { return (k / (pp * chunks)) * pp + k % pp; };
  auto fwd_chunk = [&](int k) { return (k / pp) % chunks; };
  for (int s = 0; s < pp; ++s) {
    auto& ops = p.stages[static_cast<size_t>(s)];
    const int warmup = std::min(total, (pp - s - 1) * 2 + (chunks - 1) * pp);
    for (int k = 0; k < warmup; ++k) ops.push_back({PipelineOp::Kind::kForward, fwd_chunk(k), mb_of(k)});
    for (int i = 0; i < total - warmup; ++i) {
      const int kf = warmup + i;
      ops.push_back({PipelineOp::Kind::kForward, fwd_chunk(kf), mb_of(kf)});
      ops.push_back({PipelineOp::Kind::kBackward, chunks - 1 - fwd_chunk(i), mb_of(i)});
    }
    for (int i = total - warmup; i < total; ++i) {
      ops.push_back({PipelineOp::Kind::kBackward, chunks - 1 - fwd_chunk(i), mb_of(i)});
    }
  }
  return p;
}

absl::Status CheckProgram(const PipelineProgram& program, int pp, int chunks, int micro_batches) {
  if (static_cast<int>(program.stages.size()) != pp) {
    return absl::InvalidArgumentError(absl::StrCat("program has ", program.stages.size(), " stages; the plan has ", pp));
  }
  if (!program.micro_batch_fraction.empty() &&
      static_cast<int>(program.micro_batch_fraction.size()) != micro_batches) {
    return absl::InvalidArgumentError("micro_batch_fraction must list every micro-batch");
  }
  for (int s = 0; s < pp; ++s) {
    // state per (chunk, mb): 0 nothing, 1 forward seen, 2 recompute seen, 3 backward seen
    std::vector<int> state(static_cast<size_t>(chunks * micro_batches), 0);
    for (const PipelineOp& op : program.stages[static_cast<size_t>(s)]) {
      if (op.chunk < 0 || op.chunk >= chunks || op.micro_batch < 0 || op.micro_batch >= micro_batches) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": op on chunk ", op.chunk, ", micro-batch ",
                                                       op.micro_batch, " is out of range"));
      }
      int& st = state[static_cast<size_t>(op.chunk * micro_batches + op.micro_batch)];
      const std::string what = absl::StrCat("stage ", s, ", chunk ", op.chunk, ", micro-batch ", op.micro_batch);
      switch (op.kind) {
        case PipelineOp::Kind::kForward:
          if (st != 0) return absl::InvalidArgumentError(absl::StrCat(what, ": forward twice or after backward"));
          st = 1;
          break;
        case PipelineOp::Kind::kRecompute:
          if (st != 1) return absl::InvalidArgumentError(absl::StrCat(what, ": recompute not between forward and backward"));
          st = 2;
          break;
        case PipelineOp::Kind::kBackward:
          if (st != 1 && st != 2) return absl::InvalidArgumentError(absl::StrCat(what, ": backward before forward or twice"));
          st = 3;
          break;
      }
    }
    for (size_t i = 0; i < state.size(); ++i) {
      if (state[i] != 3) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ", chunk ", i / static_cast<size_t>(micro_batches),
                                                       ", micro-batch ", i % static_cast<size_t>(micro_batches),
                                                       ": missing its forward or backward"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

class Expander {
 public:
  Expander(const SchedulingContext& ctx, const PipelineProgram& program, const ExpandOptions& opt)
      : ctx_(ctx), prog_(program), opt_(opt), plan_(ctx.plan), model_(ctx.model), sched_(ctx.cluster.num_devices()) {
    pp_ = plan_.pp;
    tp_ = plan_.tp;
    dp_ = plan_.dp;
    chunks_ = plan_.virtual_stages;
    elem_ = BytesPerElement(ctx.train.precision);
    last_bwd_.assign(static_cast<size_t>(dp_ * pp_ * tp_), std::vector<TaskId>(model_.layers.size(), -1));
  }

  absl::StatusOr<Schedule> Run() {
    const int m = prog_.NumMicroBatches();
    TESTBED_RETURN_IF_ERROR(CheckProgram(prog_, pp_, chunks_, m));
    if (opt_.tp_chunks < 1) return absl::InvalidArgumentError("tp_chunks must be >= 1");
    for (int d = 0; d < dp_; ++d) {
      for (int s = 0; s < pp_; ++s) {
        for (const PipelineOp& op : prog_.stages[static_cast<size_t>(s)]) EmitOp(d, s, op);
      }
    }
    TESTBED_RETURN_IF_ERROR(LinkTransfers());
    TESTBED_RETURN_IF_ERROR(EmitGradientSync());
    return std::move(sched_);
  }

 private:
  using PerRank = std::vector<std::vector<TaskId>>;  // deps per tensor-parallel rank

  DeviceId Dev(int d, int s, int t) const { return plan_.DeviceOf(d, s, t); }
  int Slot(int d, int s, int t) const { return (d * pp_ + s) * tp_ + t; }
  double Samples(int mb) const { return static_cast<double>(plan_.micro_batch) * prog_.Fraction(mb); }
  const StageSpec& Chunk(int s, int c) const { return plan_.Chunk(s, c); }

  std::int32_t TpGroup(int d, int s) {
    std::vector<DeviceId> g;
    for (int t = 0; t < tp_; ++t) g.push_back(Dev(d, s, t));
    return sched_.Group(g);
  }

  // Compute for layers [a, b) (descending for backward), with the tensor-parallel
  // collectives each layer needs. Returns, per TP rank, the tasks whose completion means the
  // range's output is ready.
  PerRank EmitLayers(int d, int s, int c, int mb, Phase phase, int a, int b, bool checkpoint, const PerRank& deps) {
    PerRank last = deps;
    if (a >= b) return last;
    const float frac = static_cast<float>(prog_.Fraction(mb));
    const bool backward = phase == Phase::kBackward;
    auto comm_bytes = [&](const Layer& l) {
      return backward ? l.tp_bwd_allreduce_bytes_per_sample : l.tp_fwd_allreduce_bytes_per_sample;
    };
    Task base;
    base.kind = TaskKind::kCompute;
    base.phase = phase;
    base.checkpoint = checkpoint;
    base.stage = s;
    base.chunk = c;
    base.micro_batch = mb;
    bool any_comm = false;
    if (tp_ > 1) {
      for (int l = a; l < b; ++l) any_comm = any_comm || comm_bytes(model_.layers[static_cast<size_t>(l)]) > 0;
    }
    // Tensor-parallel ranks run the same layers in lock-step: one gang task on the TP group
    // (each member computes its shard) instead of one task per rank.
    const std::int32_t group = tp_ > 1 ? TpGroup(d, s) : -1;
    auto compute = [&](int first, int end, float fraction, const std::vector<TaskId>& deps) {
      Task task = base;
      task.device = tp_ > 1 ? -1 : Dev(d, s, 0);
      task.group = group;
      task.first_layer = first;
      task.end_layer = end;
      task.fraction = fraction;
      return sched_.Add(task, deps);
    };
    auto all_deps = [&](const PerRank& per_rank) {
      std::vector<TaskId> out;
      for (const auto& v : per_rank) out.insert(out.end(), v.begin(), v.end());
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return out;
    };
    auto record_bwd = [&](int l, TaskId id) {
      if (!backward) return;
      for (int t = 0; t < tp_; ++t) last_bwd_[static_cast<size_t>(Slot(d, s, t))][static_cast<size_t>(l)] = id;
    };
    if (!any_comm) {
      const TaskId id = compute(a, b, frac, all_deps(last));
      for (int l = a; l < b; ++l) record_bwd(l, id);
      return PerRank(static_cast<size_t>(tp_), std::vector<TaskId>{id});
    }
    const int k = opt_.tp_chunks;
    std::vector<std::vector<TaskId>> chunk_deps(static_cast<size_t>(k), all_deps(last));
    for (int step = 0; step < b - a; ++step) {
      const int l = backward ? b - 1 - step : a + step;
      const Layer& layer = model_.layers[static_cast<size_t>(l)];
      for (int i = 0; i < k; ++i) {
        const TaskId id = compute(l, l + 1, frac / static_cast<float>(k), chunk_deps[static_cast<size_t>(i)]);
        chunk_deps[static_cast<size_t>(i)] = {id};
        record_bwd(l, id);
        const std::int64_t per_sample = comm_bytes(layer);
        if (per_sample > 0) {
          Task coll;
          coll.kind = TaskKind::kCollective;
          coll.op = CollectiveOp::kAllReduce;
          coll.stream = opt_.tp_overlap ? streams::kTensorComm : streams::kCompute;
          coll.phase = phase;
          coll.group = group;
          coll.stage = s;
          coll.chunk = c;
          coll.micro_batch = mb;
          coll.first_layer = l;
          coll.end_layer = l + 1;
          coll.fraction = frac / static_cast<float>(k);
          coll.bytes = static_cast<std::int64_t>(static_cast<double>(per_sample) * Samples(mb) / k);
          const TaskId cid = sched_.Add(coll, {id});
          chunk_deps[static_cast<size_t>(i)] = {cid};
          record_bwd(l, cid);
        }
      }
    }
    std::vector<TaskId> final_tasks;
    for (const auto& v : chunk_deps) final_tasks.insert(final_tasks.end(), v.begin(), v.end());
    return PerRank(static_cast<size_t>(tp_), final_tasks);
  }

  // Activation (forward) or gradient (backward) crossing into global chunk `g` for (d, t, mb).
  using TransferKey = std::tuple<int, int, int, int, int>;

  PerRank EmitRecv(int d, int s, int c, int mb, Phase phase, int g, int from_stage, std::int64_t bytes) {
    PerRank deps(static_cast<size_t>(tp_));
    for (int t = 0; t < tp_; ++t) {
      Task task;
      task.kind = TaskKind::kRecv;
      task.stream = streams::kPipelineRecv;
      task.phase = phase;
      task.device = Dev(d, s, t);
      task.peer = Dev(d, from_stage, t);
      task.stage = s;
      task.chunk = c;
      task.micro_batch = mb;
      task.bytes = bytes;
      task.fraction = static_cast<float>(prog_.Fraction(mb));
      const TaskId id = sched_.Add(task);
      recvs_[{d, t, g, mb, phase == Phase::kBackward}] = id;
      deps[static_cast<size_t>(t)] = {id};
    }
    return deps;
  }

  void EmitSend(int d, int s, int c, int mb, Phase phase, int g, int to_stage, std::int64_t bytes, const PerRank& deps) {
    for (int t = 0; t < tp_; ++t) {
      Task task;
      task.kind = TaskKind::kSend;
      task.stream = streams::kPipelineComm;
      task.phase = phase;
      task.device = Dev(d, s, t);
      task.peer = Dev(d, to_stage, t);
      task.stage = s;
      task.chunk = c;
      task.micro_batch = mb;
      task.bytes = bytes;
      task.fraction = static_cast<float>(prog_.Fraction(mb));
      sends_[{d, t, g, mb, phase == Phase::kBackward}] = sched_.Add(task, deps[static_cast<size_t>(t)]);
    }
  }

  // Bytes of the activation entering layer `first` (the previous layer's output).
  std::int64_t BoundaryBytes(int first, int mb) const {
    const Layer& prev = model_.layers[static_cast<size_t>(first - 1)];
    double bytes = static_cast<double>(prev.output_bytes_per_sample) * Samples(mb);
    if (plan_.sequence_parallel) bytes /= tp_;
    return static_cast<std::int64_t>(bytes);
  }

  void EmitOp(int d, int s, const PipelineOp& op) {
    const int c = op.chunk, mb = op.micro_batch;
    const int g = c * pp_ + s;
    const int last_g = pp_ * chunks_ - 1;
    const StageSpec& st = Chunk(s, c);
    const int r = st.recompute_layers;
    const auto key = std::tuple(d, s, c, mb);
    switch (op.kind) {
      case PipelineOp::Kind::kForward: {
        PerRank deps(static_cast<size_t>(tp_));
        if (g > 0) deps = EmitRecv(d, s, c, mb, Phase::kForward, g, (g - 1) % pp_, BoundaryBytes(st.first_layer, mb));
        const bool ckpt = r > 0 && (op.checkpoint < 0 || op.checkpoint > 0);
        PerRank last;
        if (ckpt) {
          last = EmitLayers(d, s, c, mb, Phase::kForward, st.first_layer, st.first_layer + r, true, deps);
          last = EmitLayers(d, s, c, mb, Phase::kForward, st.first_layer + r, st.end_layer, false, last);
          pending_recompute_.insert(key);
        } else {
          last = EmitLayers(d, s, c, mb, Phase::kForward, st.first_layer, st.end_layer, false, deps);
        }
        if (g < last_g) EmitSend(d, s, c, mb, Phase::kForward, g + 1, (g + 1) % pp_, BoundaryBytes(st.end_layer, mb), last);
        break;
      }
      case PipelineOp::Kind::kRecompute:
        if (pending_recompute_.erase(key)) {
          EmitLayers(d, s, c, mb, Phase::kRecompute, st.first_layer, st.first_layer + r, false,
                     PerRank(static_cast<size_t>(tp_)));
        }
        break;
      case PipelineOp::Kind::kBackward: {
        const bool recompute = pending_recompute_.erase(key) > 0;
        if (recompute && !opt_.recompute_after_gradient) {
          EmitLayers(d, s, c, mb, Phase::kRecompute, st.first_layer, st.first_layer + r, false,
                     PerRank(static_cast<size_t>(tp_)));
        }
        PerRank deps(static_cast<size_t>(tp_));
        if (g < last_g) {
          deps = EmitRecv(d, s, c, mb, Phase::kBackward, g, (g + 1) % pp_, BoundaryBytes(st.end_layer, mb));
        }
        if (recompute && opt_.recompute_after_gradient) {
          deps = EmitLayers(d, s, c, mb, Phase::kRecompute, st.first_layer, st.first_layer + r, false, deps);
        }
        PerRank last = EmitLayers(d, s, c, mb, Phase::kBackward, st.first_layer, st.end_layer, false, deps);
        if (g > 0) EmitSend(d, s, c, mb, Phase::kBackward, g - 1, (g - 1) % pp_, BoundaryBytes(st.first_layer, mb), last);
        break;
      }
    }
  }

  absl::Status LinkTransfers() {
    for (const auto& [k, recv] : recvs_) {
      auto it = sends_.find(k);
      if (it == sends_.end()) {
        return absl::InternalError(absl::StrCat("pipeline expansion: no send for ", sched_.Describe(recv)));
      }
      sched_.Link(recv, it->second);
    }
    if (sends_.size() != recvs_.size()) {
      for (const auto& [k, send] : sends_) {
        if (!recvs_.count(k)) {
          return absl::InternalError(absl::StrCat("pipeline expansion: no receive for ", sched_.Describe(send)));
        }
      }
    }
    return absl::OkStatus();
  }

  // Gradient synchronisation (bucketed over the data-parallel group, overlapping backward),
  // tied-embedding gradient all-reduce between the first and last stage, optimizer step, and
  // for ZeRO the parameter all-gather after it.
  // A compressed layer's gradient exchange: every member encodes after its last backward of
  // the layer, the payload crosses the group in the compressor's collectives, every member
  // decodes. Returns the decode tasks (the optimizer waits for them).
  absl::StatusOr<std::vector<TaskId>> EmitCompressed(int s, int t, int l, std::int32_t group) {
    const GradientCompression& gc = *ctx_.compression;
    const Layer& layer = model_.layers[static_cast<size_t>(l)];
    CompressionQuery q;
    q.elements = std::max<std::int64_t>(1, (layer.params + (pp_ > 1 ? layer.shared_params : 0)) / tp_);
    q.density = layer.kind == LayerKind::kEmbedding ? gc.embedding_density : 1.0;
    q.ranks = dp_;
    TESTBED_ASSIGN_OR_RETURN(CompressionCost cost, gc.compressor->Cost(q));
    std::vector<TaskId> encoded, decoded;
    for (int d = 0; d < dp_; ++d) {
      Task k;
      k.kind = TaskKind::kKernel;
      k.kernel = KernelOp::kEncode;
      // On the gradient-exchange stream, like a DDP communication hook: it runs as soon as
      // the layer's gradient is final, overlapping the rest of the backward pass.
      k.stream = streams::kDataComm;
      k.device = Dev(d, s, t);
      k.stage = s;
      k.first_layer = l;
      k.end_layer = l + 1;
      k.flops = cost.encode.flops;
      k.kernel_bytes = cost.encode.bytes;
      const TaskId after = last_bwd_[static_cast<size_t>(Slot(d, s, t))][static_cast<size_t>(l)];
      encoded.push_back(sched_.Add(k, after >= 0 ? std::vector<TaskId>{after} : std::vector<TaskId>{}));
    }
    std::vector<TaskId> prev = encoded;
    for (const WireTransfer& w : cost.transfers) {
      Task coll;
      coll.kind = TaskKind::kCollective;
      coll.op = w.op;
      coll.stream = streams::kDataComm;
      coll.phase = Phase::kBackward;
      coll.group = group;
      coll.stage = s;
      coll.first_layer = l;
      coll.end_layer = l + 1;
      coll.bytes = w.CollectiveBytes(dp_);
      prev = {sched_.Add(coll, prev)};
    }
    for (int d = 0; d < dp_; ++d) {
      Task k;
      k.kind = TaskKind::kKernel;
      k.kernel = KernelOp::kDecode;
      k.stream = streams::kDataComm;
      k.device = Dev(d, s, t);
      k.stage = s;
      k.first_layer = l;
      k.end_layer = l + 1;
      k.flops = cost.decode.flops;
      k.kernel_bytes = cost.decode.bytes;
      decoded.push_back(sched_.Add(k, prev));
    }
    return decoded;
  }

  absl::Status EmitGradientSync() {
    const int zero = plan_.zero_stage;
    std::vector<std::vector<TaskId>> comm_of_device(static_cast<size_t>(sched_.num_devices()));
    const GradientCompression* gc = ctx_.compression;
    auto compressed = [&](int l) {
      return gc != nullptr && gc->compressor != nullptr &&
             (!gc->embedding_only || model_.layers[static_cast<size_t>(l)].kind == LayerKind::kEmbedding);
    };
    if (dp_ > 1) {
      for (int s = 0; s < pp_; ++s) {
        // Layers in the order their gradients become final: last chunk first, descending.
        std::vector<int> order;
        for (int c = chunks_ - 1; c >= 0; --c) {
          const StageSpec& st = Chunk(s, c);
          for (int l = st.end_layer - 1; l >= st.first_layer; --l) order.push_back(l);
        }
        for (int t = 0; t < tp_; ++t) {
          std::vector<DeviceId> members;
          for (int d = 0; d < dp_; ++d) members.push_back(Dev(d, s, t));
          const std::int32_t group = sched_.Group(members);
          std::vector<int> plain;
          for (int l : order) {
            if (!compressed(l)) {
              plain.push_back(l);
              continue;
            }
            TESTBED_ASSIGN_OR_RETURN(std::vector<TaskId> decoded, EmitCompressed(s, t, l, group));
            for (int d = 0; d < dp_; ++d) comm_of_device[static_cast<size_t>(Dev(d, s, t))].push_back(decoded[static_cast<size_t>(d)]);
          }
          size_t i = 0;
          while (i < plain.size()) {
            double bytes = 0;
            std::vector<int> layers;
            while (i < plain.size() && (layers.empty() || bytes < static_cast<double>(opt_.dp_bucket_bytes))) {
              const Layer& layer = model_.layers[static_cast<size_t>(plain[i])];
              bytes += static_cast<double>(layer.params + (pp_ > 1 ? layer.shared_params : 0)) / tp_ * elem_;
              layers.push_back(plain[i]);
              ++i;
            }
            if (bytes <= 0) continue;
            Task coll;
            coll.kind = TaskKind::kCollective;
            coll.op = zero >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
            coll.stream = streams::kDataComm;
            coll.phase = Phase::kBackward;
            coll.group = group;
            coll.stage = s;
            coll.first_layer = *std::min_element(layers.begin(), layers.end());
            coll.end_layer = *std::max_element(layers.begin(), layers.end()) + 1;
            coll.bytes = static_cast<std::int64_t>(bytes);
            std::vector<TaskId> deps;
            for (int d = 0; d < dp_; ++d) {
              const auto& lb = last_bwd_[static_cast<size_t>(Slot(d, s, t))];
              if (opt_.dp_overlap) {
                for (int l : layers) deps.push_back(lb[static_cast<size_t>(l)]);
              } else {
                for (int l : order) deps.push_back(lb[static_cast<size_t>(l)]);
              }
            }
            std::sort(deps.begin(), deps.end());
            deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
            deps.erase(std::remove(deps.begin(), deps.end(), -1), deps.end());
            const TaskId id = sched_.Add(coll, deps);
            for (DeviceId dev : members) comm_of_device[static_cast<size_t>(dev)].push_back(id);
          }
        }
      }
    }
    // Tied embedding and head weights on different stages: Megatron-LM all-reduces their
    // gradients between the first and the last stage.
    int head = -1;
    for (size_t l = 0; l < model_.layers.size(); ++l) {
      if (model_.layers[l].shared_params > 0) head = static_cast<int>(l);
    }
    if (pp_ > 1 && head >= 0) {
      const std::int64_t bytes =
          static_cast<std::int64_t>(static_cast<double>(model_.layers[static_cast<size_t>(head)].shared_params) / tp_ * elem_);
      for (int d = 0; d < dp_; ++d) {
        for (int t = 0; t < tp_; ++t) {
          Task coll;
          coll.kind = TaskKind::kCollective;
          coll.op = CollectiveOp::kAllReduce;
          coll.stream = streams::kDataComm;
          coll.phase = Phase::kBackward;
          coll.group = sched_.Group({Dev(d, 0, t), Dev(d, pp_ - 1, t)});
          coll.first_layer = head;
          coll.end_layer = head + 1;
          coll.bytes = bytes;
          std::vector<TaskId> deps;
          for (TaskId x : {last_bwd_[static_cast<size_t>(Slot(d, 0, t))][0],
                           last_bwd_[static_cast<size_t>(Slot(d, pp_ - 1, t))][static_cast<size_t>(head)]}) {
            if (x >= 0) deps.push_back(x);
          }
          const TaskId id = sched_.Add(coll, deps);
          comm_of_device[static_cast<size_t>(Dev(d, 0, t))].push_back(id);
          comm_of_device[static_cast<size_t>(Dev(d, pp_ - 1, t))].push_back(id);
        }
      }
    }
    if (!opt_.optimizer_step) return absl::OkStatus();
    const bool adam = ctx_.train.optimizer == "adam";
    for (int s = 0; s < pp_; ++s) {
      const double params = StageParams(plan_, model_, s) / (zero >= 1 ? dp_ : 1);
      std::vector<std::vector<TaskId>> steps(static_cast<size_t>(tp_));
      for (int t = 0; t < tp_; ++t) {
        std::vector<TaskId> opt_tasks;
        for (int d = 0; d < dp_; ++d) {
          Task k;
          k.kind = TaskKind::kKernel;
          k.device = Dev(d, s, t);
          k.stage = s;
          // Mixed-precision Adam: ~12 FLOPs and 28 bytes of state traffic per parameter
          // (fp32 master, m, v read and written, fp16 gradient read, fp16 weight written).
          k.flops = params * (adam ? 12.0 : 3.0);
          k.kernel_bytes = params * (adam ? 28.0 : 16.0);
          opt_tasks.push_back(sched_.Add(k, comm_of_device[static_cast<size_t>(k.device)]));
        }
        if (zero >= 1 && dp_ > 1) {
          std::vector<DeviceId> members;
          for (int d = 0; d < dp_; ++d) members.push_back(Dev(d, s, t));
          Task coll;
          coll.kind = TaskKind::kCollective;
          coll.op = CollectiveOp::kAllGather;
          coll.stream = streams::kDataComm;
          coll.group = sched_.Group(members);
          coll.stage = s;
          coll.bytes = static_cast<std::int64_t>(StageParams(plan_, model_, s) * elem_);
          sched_.Add(coll, opt_tasks);
        }
      }
    }
    return absl::OkStatus();
  }

  const SchedulingContext& ctx_;
  const PipelineProgram& prog_;
  const ExpandOptions& opt_;
  const Plan& plan_;
  const ModelGraph& model_;
  Schedule sched_;
  int pp_ = 1, tp_ = 1, dp_ = 1, chunks_ = 1, elem_ = 2;
  std::map<TransferKey, TaskId> sends_, recvs_;
  std::set<std::tuple<int, int, int, int>> pending_recompute_;
  std::vector<std::vector<TaskId>> last_bwd_;  // [slot][layer] -> final backward task
};

}  // namespace

absl::StatusOr<Schedule> ExpandPipeline(const SchedulingContext& ctx, const PipelineProgram& program,
                                        const ExpandOptions& options) {
  TESTBED_RETURN_IF_ERROR(ctx.plan.Validate(static_cast<int>(ctx.model.layers.size()), ctx.cluster));
  Expander e(ctx, program, options);
  return e.Run();
}

}  // namespace testbed
