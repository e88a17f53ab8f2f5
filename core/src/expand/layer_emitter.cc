// The emitter's shared task builders (work entries, compute tasks, collectives) and the
// resharding between runs of different tensor-parallel degrees.
#include "expand/layer_emitter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::expand {

std::vector<TaskId> AllDeps(const Frontier& f) { return RankDeps(f, 0, static_cast<int>(f.size())); }

std::vector<TaskId> RankDeps(const Frontier& f, int first, int degree) {
  const auto begin = f.begin() + first, end = f.begin() + first + degree;
  std::vector<TaskId> out;
  if (begin == end) return out;
  // The ranks of a gang usually wait for the same tasks: one copy of them will do.
  if (std::all_of(begin + 1, end, [&](const std::vector<TaskId>& v) { return v == *begin; })) {
    out = *begin;
  } else {
    size_t total = 0;
    for (auto v = begin; v != end; ++v) total += v->size();
    out.reserve(total);
    for (auto v = begin; v != end; ++v) out.insert(out.end(), v->begin(), v->end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::int64_t TpBytesPerSample(const Layer& l, Phase phase) {
  return phase == Phase::kBackward ? l.tp_bwd_allreduce_bytes_per_sample : l.tp_fwd_allreduce_bytes_per_sample;
}

double ActivationScale(const Expansion& e, int layer) {
  const int bits = e.plan.LayerBits(layer).activation_bits;
  return bits > 0 ? bits / 16.0 : 1.0;
}

bool ContextParallelAttention(const Expansion& e, int layer) {
  return e.plan.cp() > 1 && e.model.layers[static_cast<size_t>(layer)].kind == LayerKind::kAttention;
}

std::int32_t Emitter::Work(const Lane& lane, const LayerRun& run, int first, int end, float fraction, LayerPart part,
                  double expert_tokens, float time_share) {
  const bool selective = e_.plan.recompute == RecomputeMode::kSelective;
  const Expansion::WorkKey key{first, end, run.tp, run.micro_batch, fraction, time_share, static_cast<std::uint8_t>(run.precision),
                               static_cast<std::uint8_t>(part),
                               static_cast<std::uint8_t>(selective && req_.phase == Phase::kBackward), expert_tokens};
  auto [it, fresh] = e_.work_ids.try_emplace(key, -1);
  if (!fresh) return it->second;
  ComputeWork w = MakeWork(lane, run, first, end, fraction, part, expert_tokens);
  if (time_share != 1.0f) {
    w.time_share = time_share;
    w.activation_bytes *= time_share;
    w.checkpoint_bytes *= time_share;
  }
  it->second = e_.sched.AddWork(w);
  return it->second;
}

ComputeWork Emitter::MakeWork(const Lane& lane, const LayerRun& run, int first, int end, float fraction, LayerPart part,
                     double expert_tokens) const {
  ComputeWork w;
  w.first_layer = first;
  w.end_layer = end;
  w.micro_batch = run.micro_batch;
  w.fraction = fraction;
  w.tp = run.tp;
  w.precision = run.precision;
  w.sequence_parallel = e_.plan.sequence_parallel;
  const bool selective = e_.plan.recompute == RecomputeMode::kSelective;
  w.selective_recompute = selective && req_.phase == Phase::kBackward;
  w.part = part;
  w.expert_tokens = expert_tokens;
  const double samples = static_cast<double>(run.micro_batch) * fraction;
  for (int l = first; l < end; ++l) {
    const Layer& layer = e_.model.layers[static_cast<size_t>(l)];
    const double scale = ActivationScale(e_, l);
    if (part == LayerPart::kWhole || part == LayerPart::kBackwardWeights || part == LayerPart::kTimeSlice) {
      // A split backward frees the activations once the weights' gradients have used them.
      w.activation_bytes += scale * ActivationBytes(layer, samples, run.tp, e_.plan.sequence_parallel, selective);
      w.checkpoint_bytes += scale * CheckpointBytes(layer, samples, run.tp, e_.plan.sequence_parallel);
    } else if (part == LayerPart::kBackwardData) {
      continue;  // holds nothing of its own: the weights' part that follows frees the layer's activations
    } else if (part == LayerPart::kMoeGate) {
      w.activation_bytes += scale * samples * static_cast<double>(layer.activation_replicated_bytes_per_sample);
      w.checkpoint_bytes += scale * CheckpointBytes(layer, samples, run.tp, e_.plan.sequence_parallel);
    } else {
      const double per_token = static_cast<double>(layer.activation_bytes_per_sample - layer.activation_replicated_bytes_per_sample) /
                               static_cast<double>(std::max<std::int64_t>(1, layer.top_k * layer.seq_len));
      w.activation_bytes += scale * per_token * expert_tokens;
    }
  }
  (void)lane;
  return w;
}

TaskId Emitter::Compute(const Lane& lane, int first_rank, int degree, std::int32_t work_id, const std::vector<TaskId>& deps,
               int sub, int subs, std::optional<Phase> phase) {
  const ComputeWork& work = e_.sched.compute_work()[static_cast<size_t>(work_id)];
  const Phase ph = phase.value_or(req_.phase);
  // Under ZeRO-3 it also waits for its layers' weights.
  const std::vector<TaskId> gathers = e_.param_gathers->Before(e_, lane, ph, first_rank, degree,
                                                               work.first_layer, work.end_layer);
  Task t = LaneTask(lane, TaskKind::kCompute, streams::kCompute, ph);
  t.checkpoint = req_.checkpoint && ph == req_.phase;
  t.first_layer = work.first_layer;
  t.end_layer = work.end_layer;
  t.fraction = work.fraction;
  t.sub_batch = static_cast<std::int16_t>(sub);
  t.sub_batches = static_cast<std::int16_t>(subs);
  t.work = work_id;
  if (degree > 1) {
    t.group = e_.TpGroup(lane.replica, lane.stage, first_rank, degree);
  } else {
    t.device = e_.Dev(lane.replica, lane.stage, first_rank);
  }
  TaskId id = -1;
  if (gathers.empty()) {
    id = e_.sched.Add(t, deps);
  } else {
    std::vector<TaskId> all = deps;
    all.insert(all.end(), gathers.begin(), gathers.end());
    id = e_.sched.Add(t, all);
  }
  e_.param_gathers->Used(e_, gathers, id);
  for (int r = first_rank; r < first_rank + degree; ++r) e_.RecordCompute(lane.iteration, e_.Dev(lane.replica, lane.stage, r), id);
  if (ph == Phase::kForward && e_.TracksForwards()) {
    for (int r = first_rank; r < first_rank + degree; ++r) {
      for (int l = work.first_layer; l < work.end_layer; ++l) {
        e_.RecordForward(lane.iteration, e_.Dev(lane.replica, lane.stage, r), l, id);
      }
    }
  }
  return id;
}

void Emitter::RecordBackward(const Lane& lane, int first_rank, int degree, int layer, TaskId id) {
  if (req_.phase != Phase::kBackward) return;
  for (int r = first_rank; r < first_rank + degree; ++r) {
    e_.RecordFinalBackward(lane.iteration, e_.Dev(lane.replica, lane.stage, r), layer, id);
  }
}

TaskId Emitter::Collective(const Lane& lane, CollectiveOp op, std::int32_t group, std::uint8_t stream, int first, int end,
                  float fraction, std::int64_t bytes, std::span<const TaskId> deps, std::int32_t work,
                  int sub, int subs, std::optional<Phase> phase) {
  Task c = LaneTask(lane, TaskKind::kCollective, stream, phase.value_or(req_.phase));
  c.op = op;
  c.group = group;
  c.first_layer = first;
  c.end_layer = end;
  c.fraction = fraction;
  c.bytes = bytes;
  c.work = work;
  c.sub_batch = static_cast<std::int16_t>(sub);
  c.sub_batches = static_cast<std::int16_t>(subs);
  return e_.sched.Add(c, deps);
}

void Emitter::Reshard(LaneState& ls, int from_tp, int to_tp, int boundary_layer) {
  const Lane& lane = ls.lane;
  const int T = e_.plan.tp(lane.stage);
  const Layer& layer = e_.model.layers[static_cast<size_t>(boundary_layer)];
  const double total = static_cast<double>(layer.output_bytes_per_sample) * ActivationScale(e_, boundary_layer) *
                       static_cast<double>(lane.samples) * lane.fraction;
  AllToAllVWork w;
  w.bytes.assign(static_cast<size_t>(T) * static_cast<size_t>(T), 0);
  const int ga = T / from_tp, gb = T / to_tp;
  for (int j = 0; j < T; ++j) {
    // Device j needs sample block j / to_tp of gb blocks; group k of the old layout holds
    // block k of ga blocks.
    const double lo = static_cast<double>(j / to_tp) / gb, hi = static_cast<double>(j / to_tp + 1) / gb;
    for (int k = 0; k < ga; ++k) {
      const double a = std::max(lo, static_cast<double>(k) / ga), b = std::min(hi, static_cast<double>(k + 1) / ga);
      if (b <= a) continue;
      const bool local = j / from_tp == k;
      const int src = local ? j : k * from_tp + j % from_tp;
      if (src == j) continue;
      w.bytes[static_cast<size_t>(src) * static_cast<size_t>(T) + static_cast<size_t>(j)] +=
          static_cast<std::int64_t>((b - a) * total);
    }
  }
  const std::int32_t group = e_.TpGroup(lane.replica, lane.stage);
  const TaskId id = Collective(lane, CollectiveOp::kAllToAllV, group, streams::kCompute, boundary_layer,
                               boundary_layer + 1, lane.fraction, 0, AllDeps(ls.frontier), e_.sched.AddWork(w));
  for (auto& f : ls.frontier) f = {id};
}

}  // namespace testbed::expand
