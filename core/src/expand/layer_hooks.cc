#include "expand/layer_hooks.h"

#include <algorithm>
#include <array>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "expand/moe_routing.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::expand {
namespace {

enum class RunKind : std::uint8_t { kDense, kTensorParallel, kExpertParallel };

// Consecutive layers one hook emits together.
struct LayerRun {
  int first = 0, end = 0;
  int tp = 1;
  Precision precision = Precision::kFp16;
  std::int64_t micro_batch = 1;
  RunKind kind = RunKind::kDense;
};

std::vector<TaskId> AllDeps(const Frontier& f) {
  std::vector<TaskId> out;
  for (const auto& v : f) out.insert(out.end(), v.begin(), v.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<TaskId> RankDeps(const Frontier& f, int first, int degree) {
  Frontier part(f.begin() + first, f.begin() + first + degree);
  return AllDeps(part);
}

std::int64_t TpBytesPerSample(const Layer& l, Phase phase) {
  return phase == Phase::kBackward ? l.tp_bwd_allreduce_bytes_per_sample : l.tp_fwd_allreduce_bytes_per_sample;
}

// Bytes of activations stored per element relative to the 16-bit figures of the model graph.
double ActivationScale(const Expansion& e, int layer) {
  const int bits = e.plan.LayerBits(layer).activation_bits;
  return bits > 0 ? bits / 16.0 : 1.0;
}

std::int64_t MicroBatchOf(const Expansion& e, const Lane& lane, int layer) {
  const auto& samples = e.Inputs(lane.iteration).layer_samples;
  if (auto it = samples.find(layer); it != samples.end()) return it->second;
  return lane.samples;
}

bool ContextParallelAttention(const Expansion& e, int layer) {
  return e.plan.cp() > 1 && e.model.layers[static_cast<size_t>(layer)].kind == LayerKind::kAttention;
}

std::vector<LayerRun> Runs(const Expansion& e, const Lane& lane, const RangeRequest& req) {
  std::vector<LayerRun> runs;
  for (int l = req.first; l < req.end; ++l) {
    LayerRun r;
    r.first = l;
    r.end = l + 1;
    r.tp = e.LayerTpOn(lane.stage, l);
    r.precision = e.LayerPrecisionOf(l);
    r.micro_batch = MicroBatchOf(e, lane, l);
    const bool ep = e.ExpertParallel(l);
    r.kind = ep ? RunKind::kExpertParallel : RunKind::kDense;
    // Under context parallelism an attention layer is a run of its own: its keys and values
    // are gathered just before it.
    const bool alone = ContextParallelAttention(e, l) || (l > req.first && ContextParallelAttention(e, l - 1));
    // Under ZeRO-3 each layer is a task of its own: its weights are gathered just before it.
    if (!runs.empty() && !ep && !alone && !ShardsParameters(e, lane.stage) && runs.back().kind != RunKind::kExpertParallel &&
        runs.back().tp == r.tp &&
        runs.back().precision == r.precision && runs.back().micro_batch == r.micro_batch) {
      runs.back().end = r.end;
      continue;
    }
    runs.push_back(r);
  }
  // A run split over several devices with tensor-parallel traffic in any of its layers emits
  // every layer apart (its collectives sit between them).
  for (LayerRun& r : runs) {
    if (r.kind != RunKind::kDense || r.tp < 2) continue;
    for (int l = r.first; l < r.end; ++l) {
      if (TpBytesPerSample(e.model.layers[static_cast<size_t>(l)], req.phase) > 0) r.kind = RunKind::kTensorParallel;
    }
  }
  if (req.phase == Phase::kBackward) std::reverse(runs.begin(), runs.end());
  return runs;
}

class Emitter {
 public:
  Emitter(Expansion& e, const RangeRequest& req) : e_(e), req_(req) {}

  // The work entry of layers [first, end) of a run, interned.
  std::int32_t Work(const Lane& lane, const LayerRun& run, int first, int end, float fraction, LayerPart part,
                    double expert_tokens, float time_share = 1.0f) {
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

  ComputeWork MakeWork(const Lane& lane, const LayerRun& run, int first, int end, float fraction, LayerPart part,
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

  // One compute task on tensor-parallel ranks [first_rank, first_rank + degree) of the lane,
  // on sub-batch `sub` of `subs`.
  // `phase` overrides the request's (a recomputation interleaved with a backward).
  TaskId Compute(const Lane& lane, int first_rank, int degree, std::int32_t work_id, const std::vector<TaskId>& deps,
                 int sub = 0, int subs = 1, std::optional<Phase> phase = std::nullopt) {
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
    std::vector<TaskId> all = deps;
    all.insert(all.end(), gathers.begin(), gathers.end());
    const TaskId id = e_.sched.Add(t, all);
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

  void RecordBackward(const Lane& lane, int first_rank, int degree, int layer, TaskId id) {
    if (req_.phase != Phase::kBackward) return;
    for (int r = first_rank; r < first_rank + degree; ++r) {
      e_.RecordFinalBackward(lane.iteration, e_.Dev(lane.replica, lane.stage, r), layer, id);
    }
  }

  TaskId Collective(const Lane& lane, CollectiveOp op, std::int32_t group, std::uint8_t stream, int first, int end,
                    float fraction, std::int64_t bytes, const std::vector<TaskId>& deps, std::int32_t work = -1,
                    int sub = 0, int subs = 1, std::optional<Phase> phase = std::nullopt) {
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

  absl::Status Dense(LaneState& ls, const LayerRun& run) {
    const Lane& lane = ls.lane;
    const int T = e_.plan.tp(lane.stage);
    const int gangs = T / run.tp;
    const float frac = lane.fraction / static_cast<float>(gangs);
    // Pieces, in the order they run; a final backward ends a piece at each bucket boundary.
    std::vector<std::pair<int, int>> pieces;
    if (req_.final_backward && req_.phase == Phase::kBackward) {
      const auto& ends = e_.bucket_ends[static_cast<size_t>(lane.stage)];
      int top = run.end;
      for (auto it = ends.lower_bound(run.end); it != ends.begin();) {
        --it;
        if (*it <= run.first) break;
        pieces.emplace_back(*it, top);
        top = *it;
      }
      pieces.emplace_back(run.first, top);
    } else if (req_.gathered_forward && req_.phase == Phase::kForward) {
      const auto& ends = e_.bucket_ends[static_cast<size_t>(lane.stage)];
      int bottom = run.first;
      for (auto it = ends.upper_bound(run.first); it != ends.end() && *it < run.end; ++it) {
        pieces.emplace_back(bottom, *it);
        bottom = *it;
      }
      pieces.emplace_back(bottom, run.end);
    } else {
      pieces.emplace_back(run.first, run.end);
    }
    const int ra = std::max(run.first, req_.recompute_first), rb = std::min(run.end, req_.recompute_end);
    for (int g = 0; g < gangs; ++g) {
      const int r0 = g * run.tp;
      std::vector<TaskId> deps = RankDeps(ls.frontier, r0, run.tp);
      if (ra < rb) {  // the checkpointed part of the run, recomputed just before its backward
        const TaskId rid = Compute(lane, r0, run.tp, Work(lane, run, ra, rb, frac, LayerPart::kWhole, 0),
                                   e_.opt.recompute_after_gradient ? deps : std::vector<TaskId>{}, g, gangs,
                                   Phase::kRecompute);
        deps.push_back(rid);
      }
      TaskId id = -1;
      if (req_.phase == Phase::kForward && req_.time_parts > 1) {
        // The run's first two layers (the embedding and the recurrent layer it feeds) one part
        // of the time steps after another, each its share of the work; the rest whole after.
        const int parts = req_.time_parts, cut = std::min(run.end, run.first + 2);
        for (int p = 0; p < parts; ++p) {
          id = Compute(lane, r0, run.tp, Work(lane, run, run.first, cut, frac / static_cast<float>(parts),
                                              LayerPart::kTimeSlice, 0),
                       deps, p, parts);
          deps.clear();
          for (int r = r0; r < r0 + run.tp; ++r) {
            e_.forward_parts[{lane.iteration, e_.Dev(lane.replica, lane.stage, r)}].push_back(id);
          }
        }
        if (cut < run.end) id = Compute(lane, r0, run.tp, Work(lane, run, cut, run.end, frac, LayerPart::kWhole, 0), {id}, g, gangs);
        for (int r = r0; r < r0 + run.tp; ++r) ls.frontier[static_cast<size_t>(r)] = {id};
        continue;
      }
      const bool split = req_.phase == Phase::kBackward && e_.opt.split_backward;
      if (split) {
        // The input gradients of the whole run first, down to its first layer, whose gradient
        // (an embedding's rows) then exists before the other weights'.
        const TaskId data = Compute(lane, r0, run.tp, Work(lane, run, run.first, run.end, frac, LayerPart::kBackwardData, 0),
                                    deps, g, gangs);
        deps = {data};
        if (req_.final_backward && run.first == 0) {
          for (int r = r0; r < r0 + run.tp; ++r) e_.embedding_backward[{lane.iteration, e_.Dev(lane.replica, lane.stage, r)}] = data;
        }
      }
      for (const auto& [a, b] : pieces) {
        id = Compute(lane, r0, run.tp, Work(lane, run, a, b, frac, split ? LayerPart::kBackwardWeights : LayerPart::kWhole, 0),
                     deps, g, gangs);
        deps.clear();
        for (int l = a; l < b; ++l) RecordBackward(lane, r0, run.tp, l, id);
      }
      for (int r = r0; r < r0 + run.tp; ++r) ls.frontier[static_cast<size_t>(r)] = {id};
    }
    return absl::OkStatus();
  }

  absl::Status TensorParallel(LaneState& ls, const LayerRun& run) {
    const Lane& lane = ls.lane;
    if (req_.phase == Phase::kBackward && e_.opt.split_backward) {
      return absl::UnimplementedError(absl::StrCat("layer ", run.first, ": a backward split into input and weight "
                                                   "gradients (split_backward) runs without tensor-parallel collectives"));
    }
    const int T = e_.plan.tp(lane.stage);
    const int gangs = T / run.tp;
    const int k = e_.opt.tp_chunks;
    const float frac = lane.fraction / static_cast<float>(gangs);
    const double samples = static_cast<double>(run.micro_batch) * static_cast<double>(lane.fraction) / gangs;
    const std::uint8_t stream = e_.opt.tp_overlap ? streams::kTensorComm : streams::kCompute;
    const bool backward = req_.phase == Phase::kBackward;
    // Whether a recomputation repeats the forward all-reduce (Megatron-LM) or not (Oases).
    const bool reduce = req_.phase != Phase::kRecompute || e_.opt.recompute_collectives;
    for (int g = 0; g < gangs; ++g) {
      const int r0 = g * run.tp;
      const std::int32_t group = e_.TpGroup(lane.replica, lane.stage, r0, run.tp);
      const std::vector<TaskId> start = RankDeps(ls.frontier, r0, run.tp);
      std::vector<std::vector<TaskId>> chunk_deps(static_cast<size_t>(k), start);
      for (int step = 0; step < run.end - run.first; ++step) {
        const int l = backward ? run.end - 1 - step : run.first + step;
        const std::int64_t per_sample = reduce ? TpBytesPerSample(e_.model.layers[static_cast<size_t>(l)], req_.phase) : 0;
        const bool recompute_here = backward && l >= req_.recompute_first && l < req_.recompute_end;
        for (int i = 0; i < k; ++i) {
          const float part = frac / static_cast<float>(k);
          const int sub = g * k + i, subs = gangs * k;
          const auto bytes_of = [&](std::int64_t per) {
            return static_cast<std::int64_t>(static_cast<double>(per) * samples / k);
          };
          // Chunks costed as shares of the whole layer, or as the layer on their share of the samples.
          const std::int32_t work = e_.opt.tp_chunk_time_share && k > 1
                                        ? Work(lane, run, l, l + 1, frac, LayerPart::kWhole, 0, 1.0f / static_cast<float>(k))
                                        : Work(lane, run, l, l + 1, part, LayerPart::kWhole, 0);
          if (recompute_here) {
            // Cross-pass: this sub-batch's recomputation of layer l runs while the previous
            // layer's backward all-reduce is on the wire.
            const TaskId rid = Compute(lane, r0, run.tp, work, e_.opt.recompute_after_gradient ? start : std::vector<TaskId>{},
                                       sub, subs, Phase::kRecompute);
            chunk_deps[static_cast<size_t>(i)].push_back(rid);
            const std::int64_t fwd = TpBytesPerSample(e_.model.layers[static_cast<size_t>(l)], Phase::kForward);
            if (e_.opt.recompute_collectives && fwd > 0) {
              chunk_deps[static_cast<size_t>(i)].push_back(Collective(lane, CollectiveOp::kAllReduce, group, stream, l, l + 1,
                                                                      part, bytes_of(fwd), {rid}, -1, sub, subs,
                                                                      Phase::kRecompute));
            }
          }
          const TaskId id = Compute(lane, r0, run.tp, work, chunk_deps[static_cast<size_t>(i)], sub, subs);
          chunk_deps[static_cast<size_t>(i)] = {id};
          RecordBackward(lane, r0, run.tp, l, id);
          if (per_sample > 0) {
            const TaskId cid = Collective(lane, CollectiveOp::kAllReduce, group, stream, l, l + 1, part,
                                          bytes_of(per_sample), {id}, -1, sub, subs);
            chunk_deps[static_cast<size_t>(i)] = {cid};
            RecordBackward(lane, r0, run.tp, l, cid);
          }
        }
        if (e_.opt.tp_chunk_join && k > 1) {
          // Wang et al.: the next layer starts once every part of this one is reduced.
          std::vector<TaskId> all;
          for (const auto& v : chunk_deps) all.insert(all.end(), v.begin(), v.end());
          for (auto& v : chunk_deps) v = all;
        }
      }
      std::vector<TaskId> last;
      for (const auto& v : chunk_deps) last.insert(last.end(), v.begin(), v.end());
      for (int r = r0; r < r0 + run.tp; ++r) ls.frontier[static_cast<size_t>(r)] = last;
    }
    return absl::OkStatus();
  }

  absl::Status ExpertParallel(std::vector<LaneState>& lanes, const LayerRun& run) {
    const int l = run.first;
    const Layer& layer = e_.model.layers[static_cast<size_t>(l)];
    const Lane& lead = lanes.front().lane;
    if (req_.phase == Phase::kBackward && e_.opt.split_backward) {
      return absl::UnimplementedError(absl::StrCat("layer ", l, " (", layer.name, "): a backward split into input and "
                                                   "weight gradients (split_backward) runs without expert parallelism"));
    }
    if (e_.plan.tp(lead.stage) != 1) {
      return absl::UnimplementedError(absl::StrCat("layer ", l, " (", layer.name, "): expert parallelism runs on stages of "
                                                   "tensor-parallel degree 1; stage ", lead.stage, " has ",
                                                   e_.plan.tp(lead.stage)));
    }
    std::vector<DeviceId> members;
    for (const LaneState& ls : lanes) members.push_back(e_.Dev(ls.lane.replica, ls.lane.stage, 0));
    const std::int32_t group = e_.sched.Group(members);
    TESTBED_ASSIGN_OR_RETURN(const TokenExchange x, ExchangeFor(e_, lead, l, run.micro_batch, static_cast<int>(lanes.size())));
    const double act_elem = ElementBytes(StoragePrecision(run.precision));
    auto matrix = [&](bool forward) {
      AllToAllVWork w;
      const size_t n = lanes.size();
      w.bytes.assign(n * n, 0);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const double tokens = forward ? x.tokens[i * n + j] : x.tokens[j * n + i];
          w.bytes[i * n + j] = static_cast<std::int64_t>(tokens * static_cast<double>(layer.hidden) * act_elem);
        }
      }
      return e_.sched.AddWork(w);
    };
    const std::int32_t to_experts = matrix(true), from_experts = matrix(false);
    auto a2a = [&](std::int32_t work, const std::vector<TaskId>& deps) {
      return Collective(lead, CollectiveOp::kAllToAllV, group, streams::kCompute, l, l + 1, lead.fraction, 0, deps, work);
    };
    auto gate = [&](LaneState& ls, const std::vector<TaskId>& deps) {
      return Compute(ls.lane, 0, 1, Work(ls.lane, run, l, l + 1, ls.lane.fraction, LayerPart::kMoeGate, 0), deps);
    };
    auto experts = [&](LaneState& ls, double tokens, const std::vector<TaskId>& deps) {
      return Compute(ls.lane, 0, 1, Work(ls.lane, run, l, l + 1, ls.lane.fraction, LayerPart::kMoeExperts, tokens), deps);
    };
    // Dispatch, each rank's experts, combine: the tasks the round trip ends with.
    auto round_trip = [&](const std::vector<TaskId>& deps) -> std::vector<TaskId> {
      const int steps = e_.plan.experts.exchange_steps;
      if (steps <= 1) {
        const TaskId dispatch = a2a(to_experts, deps);
        std::vector<TaskId> done;
        for (size_t i = 0; i < lanes.size(); ++i) done.push_back(experts(lanes[i], x.expert_tokens[i], {dispatch}));
        return {a2a(from_experts, done)};
      }
      return SteppedRoundTrip(lanes, x, layer, act_elem, group, run, steps, deps);
    };
    if (req_.phase != Phase::kBackward) {
      // When the copies leave their owners (Plan::experts.copy_timing): after the previous
      // optimizer step, in two halves during the previous MoE block, or after this layer's gates.
      const CopyTiming timing = e_.plan.experts.copy_timing;
      const bool first = req_.phase == Phase::kForward;
      const auto block = std::tuple(lead.iteration, lead.stage, lead.replica / std::max(1, e_.plan.experts.degree));
      std::vector<TaskId> weights;
      if (first && timing == CopyTiming::kAfterStep) weights = ExpertWeightsBroadcast(lanes, l, {{}});
      if (first && timing == CopyTiming::kPreviousBlock) {
        const auto it = e_.moe_block_marks.find(block);
        weights = it == e_.moe_block_marks.end() ? ExpertWeightsBroadcast(lanes, l, {{}})
                                                 : ExpertWeightsBroadcast(lanes, l, {it->second.first, it->second.second});
      }
      std::vector<TaskId> gates;
      for (LaneState& ls : lanes) gates.push_back(gate(ls, AllDeps(ls.frontier)));
      if (first && timing == CopyTiming::kAtLayer) weights = ExpertWeightsBroadcast(lanes, l, {gates});
      const std::vector<TaskId> own_gates = gates;
      gates.insert(gates.end(), weights.begin(), weights.end());
      const size_t before = e_.sched.size();
      const std::vector<TaskId> combined = round_trip(gates);
      if (first && e_.moe_marked.insert({lead.iteration, lead.stage, std::get<2>(block), l}).second) {
        // This layer's first forward: its gates and expert tasks carry the next layer's copies.
        std::vector<TaskId> expert_tasks;
        for (TaskId t = static_cast<TaskId>(before); t < static_cast<TaskId>(e_.sched.size()); ++t) {
          if (e_.sched.task(t).kind == TaskKind::kCompute) expert_tasks.push_back(t);
        }
        e_.moe_block_marks[block] = {own_gates, expert_tasks};
      }
      for (LaneState& ls : lanes) ls.frontier = {combined};
      return absl::OkStatus();
    }
    // Backward: gradients of the combined outputs go back to the experts, the experts'
    // input gradients return, then each rank's gate.
    std::vector<TaskId> ready;
    for (LaneState& ls : lanes) {
      const auto d = AllDeps(ls.frontier);
      ready.insert(ready.end(), d.begin(), d.end());
    }
    const std::vector<TaskId> back = round_trip(ready);
    for (LaneState& ls : lanes) {
      const TaskId id = gate(ls, back);
      RecordBackward(ls.lane, 0, 1, l, id);
      ls.frontier = {{id}};
    }
    return absl::OkStatus();
  }

  // FasterMoE's smart schedule: step j moves the tokens between each rank and the ranks of
  // group (its own + j) mod `steps` (all-to-all-v on the expert stream, one after another),
  // each rank's experts compute step j's tokens as they arrive, and the outputs go back step
  // by step; returns the returning exchanges.
  std::vector<TaskId> SteppedRoundTrip(std::vector<LaneState>& lanes, const TokenExchange& x, const Layer& layer,
                                       double act_elem, std::int32_t group, const LayerRun& run, int steps,
                                       const std::vector<TaskId>& deps) {
    const Lane& lead = lanes.front().lane;
    const int l = run.first;
    const size_t n = lanes.size();
    const size_t per = n / static_cast<size_t>(steps);
    auto step_of = [&](size_t src, size_t dst) {
      return (dst / per + static_cast<size_t>(steps) - src / per) % static_cast<size_t>(steps);
    };
    auto matrix = [&](size_t step, bool out) {
      AllToAllVWork w;
      w.bytes.assign(n * n, 0);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          // Out: src i sends its tokens to the experts on j; back: j returns i's outputs.
          const size_t src = out ? i : j, dst = out ? j : i;
          if (step_of(src, dst) != step) continue;
          w.bytes[i * n + j] = static_cast<std::int64_t>(x.tokens[src * n + dst] * static_cast<double>(layer.hidden) * act_elem);
        }
      }
      return e_.sched.AddWork(w);
    };
    std::vector<TaskId> arrive(static_cast<size_t>(steps));
    std::vector<std::vector<TaskId>> done(static_cast<size_t>(steps));
    for (size_t s = 0; s < static_cast<size_t>(steps); ++s) {
      arrive[s] = Collective(lead, CollectiveOp::kAllToAllV, group, streams::kExpertComm, l, l + 1, lead.fraction, 0,
                             s == 0 ? deps : std::vector<TaskId>{arrive[s - 1]}, matrix(s, true));
      for (size_t i = 0; i < n; ++i) {
        double tokens = 0;
        for (size_t src = 0; src < n; ++src) tokens += step_of(src, i) == s ? x.tokens[src * n + i] : 0.0;
        done[s].push_back(Compute(lanes[i].lane, 0, 1,
                                  Work(lanes[i].lane, run, l, l + 1, lanes[i].lane.fraction, LayerPart::kMoeExperts, tokens),
                                  {arrive[s]}));
      }
    }
    std::vector<TaskId> back;
    for (size_t s = 0; s < static_cast<size_t>(steps); ++s) {
      back.push_back(Collective(lead, CollectiveOp::kAllToAllV, group, streams::kExpertComm, l, l + 1, lead.fraction, 0,
                                done[s], matrix(s, false)));
    }
    return back;
  }

  // The first forward of a MoE layer in an iteration copies each replicated expert's weights
  // from its owner to the ranks holding copies (Prophet's Trans, FasterMoE's shadowing), in
  // as many equal parts as `after` lists, part p after the previous optimizer step and the
  // tasks in after[p].
  std::vector<TaskId> ExpertWeightsBroadcast(std::vector<LaneState>& lanes, int l,
                                             const std::vector<std::vector<TaskId>>& after) {
    const Lane& lead = lanes.front().lane;
    const int group_index = lead.replica / std::max(1, e_.plan.experts.degree);
    if (!e_.broadcast_done.insert({lead.iteration, l, lead.stage, group_index}).second) return {};
    const Layer& layer = e_.model.layers[static_cast<size_t>(l)];
    const ExpertPlacement p = PlacementFor(e_, lead.iteration, l);
    std::vector<TaskId> out;
    for (size_t ex = 0; ex < p.owner.size(); ++ex) {
      if (p.replicas[ex].empty()) continue;
      std::vector<DeviceId> g = {e_.Dev(lanes[static_cast<size_t>(p.owner[ex])].lane.replica, lead.stage, 0)};
      for (int r : p.replicas[ex]) g.push_back(e_.Dev(lanes[static_cast<size_t>(r)].lane.replica, lead.stage, 0));
      const double bytes = static_cast<double>(layer.expert_params) * e_.WeightElementBytes(l);
      const std::int32_t group = e_.sched.Group(g);
      for (size_t part = 0; part < after.size(); ++part) {
        std::vector<TaskId> deps = after[part];
        if (auto it = e_.optimizer_task.find({lead.iteration - 1, g.front()}); it != e_.optimizer_task.end()) {
          deps.push_back(it->second);
        }
        out.push_back(Collective(lead, CollectiveOp::kBroadcast, group, streams::kExpertComm, l, l + 1, 1.0f,
                                 static_cast<std::int64_t>(bytes / static_cast<double>(after.size())), deps));
      }
    }
    return out;
  }

  // Context parallelism around attention layer `l` of a CP group's lanes: one collective per
  // tensor-parallel rank over that rank of every lane, after what each lane's rank waited for,
  // and the rank's next task waits for it. Before the layer (`gather`): the keys and values of
  // the group's tokens all-gathered (forward, recomputation, and backward again); after its
  // backward: their gradients reduce-scattered back to the ranks owning the tokens.
  void ContextExchange(std::vector<LaneState>& lanes, const LayerRun& run, bool gather) {
    const Lane& lead = lanes.front().lane;
    const std::int64_t bytes = GroupKvBytes(lanes, run);
    const CollectiveOp op = gather ? CollectiveOp::kAllGather : CollectiveOp::kReduceScatter;
    for (int t = 0; t < e_.plan.tp(lead.stage); ++t) {
      std::vector<TaskId> deps;
      for (const LaneState& ls : lanes) deps.insert(deps.end(), ls.frontier[static_cast<size_t>(t)].begin(), ls.frontier[static_cast<size_t>(t)].end());
      const TaskId id = Collective(lead, op, e_.CpGroup(lead.replica, lead.stage, t), streams::kContextComm, run.first,
                                   run.end, lead.fraction, bytes, deps);
      for (LaneState& ls : lanes) {
        auto& f = ls.frontier[static_cast<size_t>(t)];
        if (gather) {
          f.push_back(id);
        } else {
          f = {id};
        }
      }
    }
  }

  // Ring attention (ContextParallelism::ring) of attention run `run` over a CP group's lanes:
  // `degree` steps, each computing 1/degree of the layer on every lane; before step j >= 1, per
  // tensor-parallel rank, a ring shift passes every rank's current block of keys and values to
  // the next rank (the first once the layer's input is ready, each later one once the block
  // before it has arrived, so the shifts overlap the steps' compute). Backward shifts carry
  // the blocks with their gradients, and a last shift takes the gradients home.
  absl::Status RingAttention(std::vector<LaneState>& lanes, const LayerRun& run,
                             const std::function<absl::Status(std::vector<LaneState>&)>& emit_step) {
    const Lane& lead = lanes.front().lane;
    const int cp = static_cast<int>(lanes.size());
    const int T = e_.plan.tp(lead.stage);
    const bool backward = req_.phase == Phase::kBackward;
    const std::int64_t block = GroupKvBytes(lanes, run) / cp;
    auto shift = [&](int t, std::int64_t bytes, const std::vector<TaskId>& deps) {
      AllToAllVWork w;
      w.bytes.assign(static_cast<size_t>(cp) * static_cast<size_t>(cp), 0);
      for (int i = 0; i < cp; ++i) w.bytes[static_cast<size_t>(i * cp + (i + 1) % cp)] = bytes;
      return Collective(lead, CollectiveOp::kAllToAllV, e_.CpGroup(lead.replica, lead.stage, t), streams::kContextComm,
                        run.first, run.end, lead.fraction, 0, deps, e_.sched.AddWork(std::move(w)));
    };
    std::vector<std::vector<TaskId>> ready(static_cast<size_t>(T));  // what the first shift waits for
    for (int t = 0; t < T; ++t) {
      for (const LaneState& ls : lanes) {
        const auto& f = ls.frontier[static_cast<size_t>(t)];
        ready[static_cast<size_t>(t)].insert(ready[static_cast<size_t>(t)].end(), f.begin(), f.end());
      }
    }
    std::vector<float> fractions;
    for (const LaneState& ls : lanes) fractions.push_back(ls.lane.fraction);
    std::vector<TaskId> previous(static_cast<size_t>(T), -1);
    for (int step = 0; step < cp; ++step) {
      if (step > 0) {
        for (int t = 0; t < T; ++t) {
          const TaskId id = shift(t, backward ? 2 * block : block,
                                  step == 1 ? ready[static_cast<size_t>(t)] : std::vector<TaskId>{previous[static_cast<size_t>(t)]});
          previous[static_cast<size_t>(t)] = id;
          for (LaneState& ls : lanes) ls.frontier[static_cast<size_t>(t)].push_back(id);
        }
      }
      for (size_t i = 0; i < lanes.size(); ++i) lanes[i].lane.fraction = fractions[i] / static_cast<float>(cp);
      const absl::Status st = emit_step(lanes);
      for (size_t i = 0; i < lanes.size(); ++i) lanes[i].lane.fraction = fractions[i];
      TESTBED_RETURN_IF_ERROR(st);
    }
    if (backward) {
      for (int t = 0; t < T; ++t) {
        std::vector<TaskId> deps = {previous[static_cast<size_t>(t)]};
        for (const LaneState& ls : lanes) {
          deps.insert(deps.end(), ls.frontier[static_cast<size_t>(t)].begin(), ls.frontier[static_cast<size_t>(t)].end());
        }
        const TaskId id = shift(t, block, deps);
        for (LaneState& ls : lanes) ls.frontier[static_cast<size_t>(t)] = {id};
      }
    }
    return absl::OkStatus();
  }

  // Keys and values of the group's tokens of this micro-batch on one tensor-parallel rank (an
  // all-gather's whole buffer).
  [[nodiscard]] std::int64_t GroupKvBytes(const std::vector<LaneState>& lanes, const LayerRun& run) const {
    const Lane& lead = lanes.front().lane;
    const Layer& layer = e_.model.layers[static_cast<size_t>(run.first)];
    const int T = e_.plan.tp(lead.stage);
    // Keys and values of one token on one tensor-parallel rank (a KV head is replicated on
    // ranks beyond kv_heads).
    const std::int64_t kv_heads = layer.kv_heads > 0 ? layer.kv_heads : layer.heads;
    const double head_dim = static_cast<double>(layer.hidden) / static_cast<double>(std::max<std::int64_t>(1, layer.heads));
    const double heads_per_rank = std::max(1.0, static_cast<double>(kv_heads) / run.tp);
    const double elem = ElementBytes(StoragePrecision(run.precision)) * ActivationScale(e_, run.first);
    const double rows = T / run.tp;  // a stage of T devices runs a layer of degree t as T / t groups
    double tokens = 0;  // the group's tokens of this micro-batch, on one group of the stage
    for (const LaneState& ls : lanes) tokens += static_cast<double>(run.micro_batch) * ls.lane.fraction * static_cast<double>(layer.seq_len);
    return static_cast<std::int64_t>(tokens / rows * 2.0 * heads_per_rank * head_dim * elem);
  }

  // Between runs of different tensor-parallel degrees: every device gets the samples its new
  // group works on (activations forward, their gradients backward) from a device that has
  // them, by one all-to-all-v over the replica's devices.
  void Reshard(LaneState& ls, int from_tp, int to_tp, int boundary_layer) {
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

 private:
  Expansion& e_;
  const RangeRequest& req_;
};

// Runs `f` on each group of `degree` consecutive lanes of a lock-step block (an expert- or
// context-parallel group inside a block that holds whole groups of both), the lanes moved
// into the group and back; a block of one group is passed as it is.
absl::Status ForEachGroup(std::vector<LaneState>& lanes, int degree,
                          const std::function<absl::Status(std::vector<LaneState>&)>& f) {
  const size_t n = static_cast<size_t>(std::max(1, degree));
  if (lanes.size() == n) return f(lanes);
  if (lanes.size() % n != 0) {
    return absl::InternalError(absl::StrCat("a lock-step block of ", lanes.size(), " replicas holds no whole groups of ", n));
  }
  for (size_t b = 0; b < lanes.size(); b += n) {
    const auto first = lanes.begin() + static_cast<std::ptrdiff_t>(b);
    std::vector<LaneState> group(std::make_move_iterator(first), std::make_move_iterator(first + static_cast<std::ptrdiff_t>(n)));
    const absl::Status st = f(group);
    std::move(group.begin(), group.end(), first);
    TESTBED_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EmitRange(Expansion& e, std::vector<LaneState>& lanes, const RangeRequest& req) {
  if (req.first >= req.end || lanes.empty()) return absl::OkStatus();
  Emitter em(e, req);
  const std::vector<LayerRun> runs = Runs(e, lanes.front().lane, req);
  const bool backward = req.phase == Phase::kBackward;
  int prev_tp = -1;
  for (const LayerRun& run : runs) {
    if (prev_tp > 0 && prev_tp != run.tp) {
      // Forward: the output of the layer before this run; backward: the gradient of the
      // output of this run's last layer (the input of the run that just ran).
      const int boundary = backward ? run.end - 1 : run.first - 1;
      for (LaneState& ls : lanes) em.Reshard(ls, prev_tp, run.tp, boundary);
    }
    prev_tp = run.tp;
    // `group`: the lanes that run this layer together (a CP group inside a CP attention layer).
    auto emit = [&](std::vector<LaneState>& group) -> absl::Status {
      switch (run.kind) {
        case RunKind::kExpertParallel:
          return ForEachGroup(group, e.plan.experts.degree, [&](std::vector<LaneState>& ep_group) -> absl::Status {
            if (backward && run.first >= req.recompute_first && run.first < req.recompute_end) {
              const RangeRequest again{Phase::kRecompute, false, run.first, run.end, false};
              Emitter recompute(e, again);
              TESTBED_RETURN_IF_ERROR(recompute.ExpertParallel(ep_group, run));
            }
            return em.ExpertParallel(ep_group, run);
          });
        case RunKind::kTensorParallel:
          for (LaneState& ls : group) TESTBED_RETURN_IF_ERROR(em.TensorParallel(ls, run));
          return absl::OkStatus();
        case RunKind::kDense:
          for (LaneState& ls : group) TESTBED_RETURN_IF_ERROR(em.Dense(ls, run));
          return absl::OkStatus();
      }
      return absl::OkStatus();
    };
    if (!ContextParallelAttention(e, run.first)) {
      TESTBED_RETURN_IF_ERROR(emit(lanes));
      continue;
    }
    TESTBED_RETURN_IF_ERROR(ForEachGroup(lanes, e.plan.cp(), [&](std::vector<LaneState>& cp_group) -> absl::Status {
      if (e.plan.context.ring) return em.RingAttention(cp_group, run, emit);
      em.ContextExchange(cp_group, run, true);
      TESTBED_RETURN_IF_ERROR(emit(cp_group));
      if (backward) em.ContextExchange(cp_group, run, false);
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
