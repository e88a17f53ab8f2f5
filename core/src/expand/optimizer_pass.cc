// Pass 5: the optimizer step of each iteration waits for its devices' gradients (the
// gradient-sync pass recorded them); under ZeRO the updated weight shards are all-gathered
// after it (GatherParameters, called per iteration from pass 4 so the data-parallel stream
// keeps iteration order) and the next iteration's first compute waits for that, or with
// param_gather_overlap each layer's first forward waits for its bucket's gather. Last, each
// device's static memory: weights, gradients and optimizer state of what it owns, stashed
// weight versions, the expert copies it holds, and what the plan keeps resident there
// (StageReplica::resident_bytes: a feature loader's rows).
#include <algorithm>

#include "expand/expansion.h"
#include "expand/param_gather.h"
#include "testbed/memory_model.h"

namespace testbed::expand {

namespace {

// The layers of a stage's buckets in forward order (the buckets close last layer first), each
// bucket cut into runs of consecutive layers (a stage's chunks are not contiguous).
std::vector<std::vector<int>> ForwardRuns(const Expansion& e, int s) {
  std::vector<std::vector<int>> runs;
  const std::vector<Bucket>& buckets = e.buckets[static_cast<size_t>(s)];
  for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) {
    std::vector<int> layers = b->layers;
    std::sort(layers.begin(), layers.end());
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i == 0 || layers[i] != layers[i - 1] + 1) runs.emplace_back();
      runs.back().push_back(layers[i]);
    }
  }
  return runs;
}

// Calls fn(stage, members, steps) for every stage whose weights are gathered after the step
// (ZeRO-1/2 over two or more replicas; ZeRO-3 gathers each layer before use instead) and each
// tensor-parallel shard of it: the replicas holding the shard, and their steps of iteration `it`.
template <typename Fn>
void ForEachShardAfterStep(Expansion& e, int it, Fn fn) {
  for (int s = 0; s < e.pp; ++s) {
    const int dp = e.plan.dp(s);
    if (dp < 2 || ShardsParameters(e, s)) continue;
    for (int t = 0; t < e.plan.tp(s); ++t) {
      std::vector<DeviceId> members;
      std::vector<TaskId> steps;
      for (int d = 0; d < dp; ++d) {
        const DeviceId dev = e.Dev(d, s, t);
        members.push_back(dev);
        if (auto found = e.optimizer_task.find({it, dev}); found != e.optimizer_task.end()) steps.push_back(found->second);
      }
      if (!steps.empty()) fn(s, members, steps);
    }
  }
}

}  // namespace

absl::Status GatherParameters(Expansion& e, int it) {
  if (e.plan.zero_stage < 1 || e.optimizer_task.empty()) return absl::OkStatus();
  if (!e.TracksForwards()) {
    // One gather of the stage's weights inside the step.
    ForEachShardAfterStep(e, it, [&](int s, const std::vector<DeviceId>& members, const std::vector<TaskId>& steps) {
      Task coll = GroupTask(CollectiveOp::kAllGather, streams::kDataComm, e.sched.Group(members), s, 0, 0,
                            static_cast<std::int64_t>(StageParams(e.plan, e.model, s) * e.elem), Phase::kForward);
      coll.iteration = it;
      const TaskId id = e.sched.Add(coll, steps);
      for (DeviceId dev : members) e.parameters_gathered[{it, dev}] = id;
    });
    return absl::OkStatus();
  }
  // Megatron-Core's overlap_param_gather: per bucket (forward order), one all-gather of its
  // layers' weights; they belong to iteration it + 1, whose forwards wait for them
  // (OptimizerPass), and the last iteration has none.
  if (it + 1 >= e.iterations) return absl::OkStatus();
  std::vector<std::vector<std::vector<int>>> runs(static_cast<size_t>(e.pp));  // per stage, made on first use
  ForEachShardAfterStep(e, it, [&](int s, const std::vector<DeviceId>& members, const std::vector<TaskId>& steps) {
    std::vector<std::vector<int>>& stage_runs = runs[static_cast<size_t>(s)];
    if (stage_runs.empty()) stage_runs = ForwardRuns(e, s);
    const std::int32_t group = e.sched.Group(members);
    for (const std::vector<int>& run : stage_runs) {
      double bytes = 0;
      for (int l : run) bytes += e.ReplicatedParams(l) * e.WeightElementBytes(l);
      if (bytes <= 0) continue;
      Task coll = GroupTask(CollectiveOp::kAllGather, streams::kDataComm, group, s, run.front(), run.back() + 1,
                            static_cast<std::int64_t>(bytes), Phase::kForward);
      coll.iteration = it + 1;
      const TaskId id = e.sched.Add(coll, steps);
      for (DeviceId dev : members) e.bucket_gathers[{it + 1, dev}].emplace_back(run, id);
    }
  });
  return absl::OkStatus();
}

absl::Status OptimizerPass(Expansion& e) {
  for (const auto& [key, task] : e.optimizer_task) {
    auto ready = e.gradients_ready.find(key);
    if (ready == e.gradients_ready.end()) continue;
    for (TaskId g : ready->second) e.sched.AddDep(task, g);
  }
  for (const auto& [key, gather] : e.parameters_gathered) {
    const TaskId next = e.FirstCompute(key.first + 1, key.second);
    if (next >= 0) e.sched.AddDep(next, gather);
  }
  // Per bucket: each layer's first forward waits for the gather of its weights; a layer whose
  // forward the compute pass did not record (an expert's) holds back the first compute.
  for (const auto& [key, gathers] : e.bucket_gathers) {
    const auto& [it, dev] = key;
    for (const auto& [layers, gather] : gathers) {
      for (int l : layers) {
        TaskId use = e.FirstForward(it, dev, l);
        if (use < 0) use = e.FirstCompute(it, dev);
        if (use >= 0) e.sched.AddDep(use, gather);
      }
    }
  }
  e.param_gathers->AfterSteps(e);
  for (int s = 0; s < e.pp; ++s) {
    const Stage& st = e.StageAt(s);
    for (int r = 0; r < st.dp(); ++r) {
      const StaticMemory m = StaticBytes(e.OwnedParams(s, r), e.ctx.train.precision, e.ctx.train.optimizer,
                                         e.plan.zero_stage, st.dp());
      const double copies = e.CopiedExpertParams(s, r) * 2.0 * e.elem;  // weights and their gradients
      const double stashed = static_cast<double>(e.weight_versions - 1) * m.weights;
      // ZeRO-3: the whole weights of the layer in use and of the one prefetched (the two
      // largest of the stage's, to be safe) on top of the shards.
      double gathered = 0;
      if (ShardsParameters(e, s)) {
        std::vector<double> sizes;
        for (const StageSpec& c : st.chunks) {
          for (int l = c.first_layer; l < c.end_layer; ++l) sizes.push_back(e.ReplicatedParams(l) * e.WeightElementBytes(l));
        }
        std::sort(sizes.rbegin(), sizes.rend());
        for (size_t i = 0; i < sizes.size() && i < 2; ++i) gathered += sizes[i];
      }
      // FP8 training: every rank keeps the scaling state of each FP8 linear layer it runs.
      double scaling = 0;
      if (e.ctx.train.precision == Precision::kFp8) {
        for (const StageSpec& c : st.chunks) {
          for (int l = c.first_layer; l < c.end_layer; ++l) {
            scaling += Fp8ScalingBytes(e.model.layers[static_cast<size_t>(l)], e.ctx.train.fp8_amax_history);
          }
        }
      }
      const StageReplica& rep = st.replicas[static_cast<size_t>(r)];
      for (DeviceId d : rep.devices) {
        e.sched.SetStaticBytes(d, m.total() + copies + stashed + gathered + scaling + rep.resident_bytes);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
