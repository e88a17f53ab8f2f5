// Context-parallel attention: keys and values all-gathered over the CP group (their
// gradients reduce-scattered), or ring attention in steps with chained ring shifts.
#include "expand/layer_emitter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::expand {

void Emitter::ContextExchange(std::vector<LaneState>& lanes, const LayerRun& run, bool gather) {
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

absl::Status Emitter::RingAttention(std::vector<LaneState>& lanes, const LayerRun& run,
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

std::int64_t Emitter::GroupKvBytes(const std::vector<LaneState>& lanes, const LayerRun& run) const {
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

}  // namespace testbed::expand
