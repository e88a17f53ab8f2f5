// Expert-parallel MoE layers: gates, dispatch and combine all-to-all-v with the iteration's
// routing, each rank's experts, FasterMoE's stepped exchange, and the expert copies' broadcasts.
#include "expand/layer_emitter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::expand {

absl::Status Emitter::ExpertParallel(std::vector<LaneState>& lanes, const LayerRun& run) {
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

std::vector<TaskId> Emitter::SteppedRoundTrip(std::vector<LaneState>& lanes, const TokenExchange& x, const Layer& layer,
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

std::vector<TaskId> Emitter::ExpertWeightsBroadcast(std::vector<LaneState>& lanes, int l,
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

}  // namespace testbed::expand
