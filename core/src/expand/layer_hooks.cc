#include "expand/layer_hooks.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "expand/layer_emitter.h"
#include "expand/param_gather.h"
#include "testbed/status_macros.h"

namespace testbed::expand {
namespace {

std::int64_t MicroBatchOf(const Expansion& e, const Lane& lane, int layer) {
  const auto& samples = e.Inputs(lane.iteration).layer_samples;
  if (auto it = samples.find(layer); it != samples.end()) return it->second;
  return lane.samples;
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

