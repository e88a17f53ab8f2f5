#include "expand/param_gather.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace testbed::expand {

// The executor finds a task's piece from its stream.
static_assert(streams::LinkClassOf(streams::kParamComm) == 0 && streams::LinkClassOf(streams::kDataComm) == 0 &&
              streams::LinkClassOf(streams::kParamComm2) == 1 && streams::LinkClassOf(streams::kDataComm2) == 1);

std::vector<ParamPiece> PiecesOf(const Plan& plan, int l) {
  if (plan.param_links.empty() || static_cast<size_t>(l) >= plan.param_links.shares.size()) return {ParamPiece{}};
  std::vector<ParamPiece> out;
  const std::vector<double>& row = plan.param_links.shares[static_cast<size_t>(l)];
  for (size_t c = 0; c < plan.param_links.classes.size(); ++c) {
    if (row[c] <= 0) continue;
    out.push_back(ParamPiece{plan.param_links.classes[c], row[c], c == 0 ? streams::kParamComm : streams::kParamComm2,
                             c == 0 ? streams::kDataComm : streams::kDataComm2});
  }
  return out;
}

bool ShardsParameters(const Expansion& e, int s) { return e.plan.zero_stage >= 3 && e.plan.dp(s) >= 2; }

absl::Status CheckParameterSharding(const Expansion& e) {
  for (int s = 0; s < e.pp; ++s) {
    if (!ShardsParameters(e, s)) continue;
    if (e.weight_versions > 1) {
      return absl::UnimplementedError("zero_stage = 3 with a pipeline that keeps several weight versions");
    }
    for (const StageSpec& c : e.StageAt(s).chunks) {
      for (int l = c.first_layer; l < c.end_layer; ++l) {
        if (e.ExpertParallel(l)) return absl::UnimplementedError("zero_stage = 3 with expert parallelism");
      }
    }
    const std::vector<PipelineOp>& first = e.OpsOf(s, 0);
    for (int r = 1; r < e.plan.dp(s); ++r) {
      const std::vector<PipelineOp>& ops = e.OpsOf(s, r);
      bool same = ops.size() == first.size();
      for (size_t k = 0; same && k < ops.size(); ++k) {
        same = ops[k].kind == first[k].kind && ops[k].micro_batch == first[k].micro_batch && ops[k].chunk == first[k].chunk;
      }
      if (!same) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zero_stage = 3: replica ", r, " of stage ", s, " runs other micro-batches than replica 0; sharded "
            "parameters are all-gathered by every replica together, so every replica must run the same ones"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<TaskId> ParameterGathers::Before(Expansion& e, const Lane& lane, Phase phase, int first_rank, int degree,
                                             int first, int end) {
  std::vector<TaskId> out;
  if (!ShardsParameters(e, lane.stage)) return out;
  for (int l = first; l < end; ++l) {
    const double params = e.ReplicatedParams(l);
    if (params <= 0) continue;
    for (int t = first_rank; t < first_rank + degree; ++t) {
      const Key key{lane.iteration, lane.stage, lane.chunk, lane.micro_batch, l, static_cast<int>(phase), t};
      auto [it, fresh] = gathers_.try_emplace(key);
      if (fresh) {
        Gather& g = it->second;
        g.iteration = lane.iteration;
        for (int d = 0; d < e.plan.dp(lane.stage); ++d) g.members.push_back(e.Dev(d, lane.stage, t));
        std::vector<std::vector<TaskId>>& order = order_[{lane.stage, t}];
        g.index = order.size();
        // One all-gather per piece, each on its link class and stream, all at once.
        for (const ParamPiece& piece : PiecesOf(e.plan, l)) {
          Task task = GroupTask(CollectiveOp::kAllGather, piece.gather_stream, e.sched.Group(g.members), lane.stage, l,
                                l + 1, static_cast<std::int64_t>(piece.share * params * e.WeightElementBytes(l)), phase);
          task.iteration = lane.iteration;
          task.chunk = lane.chunk;
          task.micro_batch = lane.micro_batch;
          task.links = piece.links;
          g.ids.push_back(e.sched.Add(task));
          where_[g.ids.back()] = {{lane.stage, t}, g.index};
        }
        order.push_back(g.ids);
        if (auto waiting = pending_.find({{lane.stage, t}, g.index}); waiting != pending_.end()) {
          for (TaskId use : waiting->second) {
            for (TaskId id : g.ids) e.sched.AddDep(id, use);
          }
          pending_.erase(waiting);
        }
      }
      out.insert(out.end(), it->second.ids.begin(), it->second.ids.end());
    }
  }
  return out;
}

void ParameterGathers::Used(Expansion& e, const std::vector<TaskId>& gathers, TaskId use) {
  std::set<std::pair<std::pair<int, int>, size_t>> seen;  // a layer's pieces share one place in the order
  for (TaskId g : gathers) {
    const auto& [shard, index] = where_.at(g);
    if (!seen.insert({shard, index}).second) continue;
    const std::vector<std::vector<TaskId>>& order = order_.at(shard);
    if (index + 2 < order.size()) {
      for (TaskId later : order[index + 2]) e.sched.AddDep(later, use);
    } else {
      pending_[{shard, index + 2}].push_back(use);  // added when that gather is made
    }
  }
}

void ParameterGathers::AfterSteps(Expansion& e) const {
  for (const auto& [key, g] : gathers_) {
    if (g.iteration == 0) continue;
    for (DeviceId d : g.members) {
      if (auto step = e.optimizer_task.find({g.iteration - 1, d}); step != e.optimizer_task.end()) {
        for (TaskId id : g.ids) e.sched.AddDep(id, step->second);
      }
    }
  }
}

}  // namespace testbed::expand
