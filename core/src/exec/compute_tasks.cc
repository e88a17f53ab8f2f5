#include "exec/compute_tasks.h"

#include "absl/strings/str_cat.h"
#include "exec/gpt_stack.h"
#include "testbed/status_macros.h"
#include "testbed/train/loss.h"

namespace testbed::exec {
namespace {

SplitAtAllReduce* SplitLayer(train::Layer<float>& layer) {
  auto* split = dynamic_cast<SplitAtAllReduce*>(&layer);
  return split != nullptr && split->split() ? split : nullptr;
}

}  // namespace

absl::Status ComputeTasks::Run(const Task& t) {
  // Under PipeDream-2BW the task runs on its iteration's weight version.
  TESTBED_RETURN_IF_ERROR(s_.versions.Enter(t.iteration, t.phase));
  absl::Status st;
  switch (t.phase) {
    case Phase::kForward: st = Forward(t, false); break;
    case Phase::kRecompute: st = Forward(t, true); break;
    case Phase::kBackward: st = Backward(t); break;
  }
  s_.versions.Leave();
  return st;
}

SampleBlocks& ComputeTasks::Blocks(std::map<RankState::Key, SampleBlocks>& store, int chunk, int mb, int subs) {
  auto it = store.find({chunk, mb});
  if (it == store.end() || it->second.count() != subs) {
    it = store.insert_or_assign({chunk, mb}, SampleBlocks(subs, s_.seq, s_.SamplesPerMicroBatch())).first;
  }
  return it->second;
}

absl::StatusOr<Tensor> ComputeTasks::Read(std::map<RankState::Key, SampleBlocks>& store, int chunk, int mb, int sub,
                                          int subs, Phase phase) {
  auto it = store.find({chunk, mb});
  const int held = it == store.end() ? subs : it->second.count();
  // Finish the layers still waiting for their all-reduce in the blocks this read needs.
  for (int b = 0; b < held; ++b) {
    if (held == subs && b != sub) continue;
    auto a = awaiting_.find({chunk, mb, b, static_cast<int>(phase)});
    if (a != awaiting_.end()) TESTBED_RETURN_IF_ERROR(Resolve({a->second, mb, b, static_cast<int>(phase)}));
  }
  it = store.find({chunk, mb});
  if (it == store.end()) {
    return absl::InternalError(phase == Phase::kBackward ? "backward before the gradient of its output exists"
                                                         : "forward before its input exists");
  }
  return it->second.Get(sub, subs);
}

absl::StatusOr<Tensor> ComputeTasks::ForwardInput(const Task& t) {
  const StageSpec& st = s_.in.plan.Chunk(s_.stage, t.chunk);
  const int slot = s_.Slot(t);
  if (t.first_layer != st.first_layer) return Read(s_.act, t.chunk, slot, t.sub_batch, t.sub_batches, Phase::kForward);
  const std::int64_t rows = s_.SamplesPerMicroBatch() * s_.seq / t.sub_batches;
  if (t.first_layer == 0) {
    TESTBED_ASSIGN_OR_RETURN(const Batch* data, s_.DataOf(t.iteration));
    return Tensor(data->inputs.middleRows(s_.FirstSample(t.micro_batch) * s_.seq + t.sub_batch * rows, rows));
  }
  auto it = s_.received.find({{t.chunk, slot}, false});
  if (it == s_.received.end()) return absl::InternalError("forward before its activation arrived");
  TESTBED_ASSIGN_OR_RETURN(Tensor x, it->second.Get(t.sub_batch, t.sub_batches));
  if (t.sub_batch + 1 == t.sub_batches) s_.received.erase(it);
  return x;
}

absl::StatusOr<Tensor> ComputeTasks::BackwardInput(const Task& t) {
  const StageSpec& st = s_.in.plan.Chunk(s_.stage, t.chunk);
  const int last_layer = static_cast<int>(s_.in.model.layers.size());
  const int slot = s_.Slot(t);
  if (t.end_layer != st.end_layer || t.end_layer == last_layer) {
    return Read(s_.grad, t.chunk, slot, t.sub_batch, t.sub_batches, Phase::kBackward);
  }
  auto it = s_.received.find({{t.chunk, slot}, true});
  if (it == s_.received.end()) return absl::InternalError("backward before its gradient arrived");
  TESTBED_ASSIGN_OR_RETURN(Tensor dy, it->second.Get(t.sub_batch, t.sub_batches));
  if (t.sub_batch + 1 == t.sub_batches) s_.received.erase(it);
  return dy;
}

absl::Status ComputeTasks::Forward(const Task& t, bool recompute) {
  const int mb = s_.Slot(t), sub = t.sub_batch;
  const Phase phase = recompute ? Phase::kRecompute : Phase::kForward;
  Tensor x;
  if (recompute) {
    auto it = s_.checkpoint.find({t.first_layer, mb, sub});
    if (it == s_.checkpoint.end()) return absl::InternalError("recompute without a checkpoint");
    x = it->second;
  } else {
    TESTBED_ASSIGN_OR_RETURN(x, ForwardInput(t));
    if (t.checkpoint) s_.checkpoint[{t.first_layer, mb, sub}] = x;
  }
  for (int l = t.first_layer; l < t.end_layer; ++l) {
    train::Layer<float>& layer = s_.model.layer(l);
    train::LayerCache<float>& cache = s_.cache[{l, mb, sub}];
    // A split layer alone in its task stops at its partial result: the schedule's all-reduce
    // follows. (In a task of several layers it reduces inside, blocking.)
    if (SplitAtAllReduce* split = SplitLayer(layer); split != nullptr && l + 1 == t.end_layer) {
      Pending p;
      p.layer = l;
      p.chunk = t.chunk;
      p.subs = t.sub_batches;
      TESTBED_ASSIGN_OR_RETURN(p.partial, split->ForwardPartial(x, cache));
      p.input = std::move(x);
      if (t.checkpoint && !recompute) s_.cache.erase({l, mb, sub});
      pending_[{l, mb, sub, static_cast<int>(phase)}] = std::move(p);
      if (!recompute) awaiting_[{t.chunk, mb, sub, static_cast<int>(phase)}] = l;
      return absl::OkStatus();
    }
    TESTBED_ASSIGN_OR_RETURN(x, layer.Forward(x, cache));
    if (t.checkpoint && !recompute) s_.cache.erase({l, mb, sub});
  }
  if (recompute) return absl::OkStatus();  // it rebuilt the caches; its output is not needed
  if (t.end_layer == static_cast<int>(s_.in.model.layers.size())) {
    const std::int64_t rows = s_.SamplesPerMicroBatch() * s_.seq / t.sub_batches;
    TESTBED_ASSIGN_OR_RETURN(const Batch* data, s_.DataOf(t.iteration));
    const auto begin = data->targets.begin() + s_.FirstSample(t.micro_batch) * s_.seq + sub * rows;
    const std::vector<std::int64_t> targets(begin, begin + rows);
    const double normalizer = static_cast<double>(s_.SamplesPerMicroBatch() * s_.micro_batches * s_.dp * s_.seq);
    TESTBED_ASSIGN_OR_RETURN(auto lg, train::ClassificationLoss<float>(s_.in.loss, x, targets, normalizer));
    // Every tensor-parallel rank computes the same loss; count it once.
    if (s_.tp_rank == 0) s_.AddLoss(t.iteration, lg.loss);
    Blocks(s_.grad, t.chunk, mb, t.sub_batches).Set(sub, std::move(lg.dlogits));
    return absl::OkStatus();
  }
  Blocks(s_.act, t.chunk, mb, t.sub_batches).Set(sub, std::move(x));
  return absl::OkStatus();
}

absl::Status ComputeTasks::Backward(const Task& t) {
  const int mb = s_.Slot(t), sub = t.sub_batch;
  TESTBED_ASSIGN_OR_RETURN(Tensor dy, BackwardInput(t));
  for (int l = t.end_layer - 1; l >= t.first_layer; --l) {
    auto it = s_.cache.find({l, mb, sub});
    if (it == s_.cache.end()) return absl::InternalError(absl::StrCat("no saved activations for layer ", l));
    train::Layer<float>& layer = s_.model.layer(l);
    if (SplitAtAllReduce* split = SplitLayer(layer); split != nullptr && l == t.first_layer && t.end_layer == l + 1) {
      Pending p;
      p.layer = l;
      p.chunk = t.chunk;
      p.subs = t.sub_batches;
      TESTBED_ASSIGN_OR_RETURN(p.partial, split->BackwardPartial(dy, it->second));
      p.input = std::move(dy);
      pending_[{l, mb, sub, static_cast<int>(Phase::kBackward)}] = std::move(p);
      awaiting_[{t.chunk, mb, sub, static_cast<int>(Phase::kBackward)}] = l;
      return absl::OkStatus();
    }
    TESTBED_ASSIGN_OR_RETURN(dy, layer.Backward(dy, it->second));
    s_.cache.erase(it);
    s_.checkpoint.erase({l, mb, sub});
  }
  Blocks(s_.grad, t.chunk, mb, t.sub_batches).Set(sub, std::move(dy));
  return absl::OkStatus();
}

absl::Status ComputeTasks::StartAllReduce(const Task& t) {
  const PendingKey key{t.first_layer, s_.Slot(t), t.sub_batch, static_cast<int>(t.phase)};
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (SplitLayer(s_.model.layer(t.first_layer)) != nullptr) {
      return absl::InternalError(absl::StrCat("layer ", t.first_layer, " has no partial result to all-reduce"));
    }
    return absl::OkStatus();  // replicated over the group: every rank already has the whole result
  }
  Pending& p = it->second;
  if (p.request != nullptr) return absl::InternalError("the all-reduce of this partial result started twice");
  CommGroup* group = s_.Group(t.group);
  if (group == nullptr) return absl::InternalError("not a member of the task's tensor-parallel group");
  TESTBED_ASSIGN_OR_RETURN(p.request, group->IAllReduce(p.partial.data(), p.partial.data(), p.partial.size(),
                                                        DataType::kFloat32, ReduceOp::kSum));
  p.started_at = tick_;
  return absl::OkStatus();
}

absl::Status ComputeTasks::Resolve(PendingKey key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return absl::InternalError("no pending layer to finish");
  Pending p = std::move(it->second);
  pending_.erase(it);
  const auto [layer, mb, sub, phase_index] = key;
  const Phase phase = static_cast<Phase>(phase_index);
  if (phase != Phase::kRecompute) awaiting_.erase({p.chunk, mb, sub, phase_index});
  // A recomputation's output is never read (each layer's own input was kept), so a schedule
  // may leave out its all-reduce (ExpandOptions::recompute_collectives = false, Oases).
  if (p.request == nullptr && phase == Phase::kRecompute) return absl::OkStatus();
  if (p.request == nullptr) {
    return absl::InternalError(absl::StrCat("layer ", layer, "'s tensor-parallel all-reduce was never run (the "
                                            "schedule has no all-reduce task after it)"));
  }
  TESTBED_RETURN_IF_ERROR(p.request->Wait());
  s_.metrics.tensor_parallel_bytes += static_cast<double>(p.partial.size()) * sizeof(float);
  // Another task ran between the start and this wait: the all-reduce overlapped it.
  if (tick_ > p.started_at + 1) s_.metrics.tensor_parallel_overlapped += 1;
  auto* split = SplitLayer(s_.model.layer(layer));
  switch (phase) {
    case Phase::kRecompute:
      return absl::OkStatus();
    case Phase::kForward:
      Blocks(s_.act, p.chunk, mb, p.subs).Set(sub, split->ForwardFinish(p.input, p.partial));
      return absl::OkStatus();
    case Phase::kBackward: {
      auto c = s_.cache.find({layer, mb, sub});
      if (c == s_.cache.end()) return absl::InternalError(absl::StrCat("no saved activations for layer ", layer));
      TESTBED_ASSIGN_OR_RETURN(Tensor dx, split->BackwardFinish(p.input, p.partial, c->second));
      s_.cache.erase(c);
      s_.checkpoint.erase({layer, mb, sub});
      Blocks(s_.grad, p.chunk, mb, p.subs).Set(sub, std::move(dx));
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ComputeTasks::Whole(int chunk, int micro_batch, bool backward) {
  return Read(backward ? s_.grad : s_.act, chunk, micro_batch, 0, 1, backward ? Phase::kBackward : Phase::kForward);
}

absl::Status ComputeTasks::Drain() {
  while (!pending_.empty()) TESTBED_RETURN_IF_ERROR(Resolve(pending_.begin()->first));
  return absl::OkStatus();
}

}  // namespace testbed::exec
