// Dense runs (one task per run, cut at gradient-bucket boundaries on a final backward) and
// tensor-parallel runs (a task per layer and sub-batch, and the all-reduces between them).
#include "expand/layer_emitter.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::expand {

absl::Status Emitter::Dense(LaneState& ls, const LayerRun& run) {
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

absl::Status Emitter::TensorParallel(LaneState& ls, const LayerRun& run) {
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
                                                                    part, bytes_of(fwd), std::array{rid}, -1, sub, subs,
                                                                    Phase::kRecompute));
          }
        }
        const TaskId id = Compute(lane, r0, run.tp, work, chunk_deps[static_cast<size_t>(i)], sub, subs);
        chunk_deps[static_cast<size_t>(i)] = {id};
        RecordBackward(lane, r0, run.tp, l, id);
        if (per_sample > 0) {
          const TaskId cid = Collective(lane, CollectiveOp::kAllReduce, group, stream, l, l + 1, part,
                                        bytes_of(per_sample), std::array{id}, -1, sub, subs);
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
    if (chunk_deps.size() == 1) {
      last = std::move(chunk_deps.front());
    } else {
      for (const auto& v : chunk_deps) last.insert(last.end(), v.begin(), v.end());
    }
    for (int r = r0; r < r0 + run.tp; ++r) ls.frontier[static_cast<size_t>(r)] = last;
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
