#include "expand/p2p.h"

#include "absl/strings/str_cat.h"

namespace testbed::expand {

std::int64_t BoundaryBytes(const Expansion& e, const Lane& lane, int first) {
  const int prev = first - 1;
  const Layer& layer = e.model.layers[static_cast<size_t>(prev)];
  const int bits = e.plan.LayerBits(prev).activation_bits;
  double bytes = static_cast<double>(layer.output_bytes_per_sample) * static_cast<double>(lane.samples) *
                 e.Fraction(lane.stage, lane.replica, lane.micro_batch);
  if (bits > 0) bytes *= bits / 16.0;
  if (e.plan.sequence_parallel) bytes /= e.plan.tp(lane.stage);
  return static_cast<std::int64_t>(bytes);
}

void EmitRecv(Expansion& e, LaneState& ls, Phase phase, int g, int from_stage, std::int64_t bytes) {
  const Lane& lane = ls.lane;
  const int tp = e.plan.tp(lane.stage);
  const int from_tp = e.plan.tp(from_stage);
  const auto [from_replica, from_mb] = e.Locate(from_stage, e.GlobalMicroBatch(lane.stage, lane.replica, lane.micro_batch));
  (void)from_mb;
  for (int t = 0; t < tp; ++t) {
    const bool back = e.p2p_by_direction && phase == Phase::kBackward;
    Task task = LaneTask(lane, TaskKind::kRecv, back ? streams::kPipelineRecvBack : streams::kPipelineRecv, phase);
    task.device = e.Dev(lane.replica, lane.stage, t);
    task.peer = e.Dev(from_replica, from_stage, t % from_tp);
    task.bytes = bytes;
    const TaskId id = e.sched.Add(task);
    e.MeetTransfer({lane.iteration, g, lane.replica, t, lane.micro_batch, phase == Phase::kBackward ? 1 : 0}, id, true);
    ls.frontier[static_cast<size_t>(t)] = {id};
  }
}

void EmitSend(Expansion& e, const LaneState& ls, Phase phase, int to_g, int to_stage, std::int64_t bytes) {
  const Lane& lane = ls.lane;
  const int tp = e.plan.tp(lane.stage);
  const int to_tp = e.plan.tp(to_stage);
  const auto [to_replica, to_mb] = e.Locate(to_stage, e.GlobalMicroBatch(lane.stage, lane.replica, lane.micro_batch));
  for (int t = 0; t < to_tp; ++t) {
    const int from = t % tp;
    const bool back = e.p2p_by_direction && phase == Phase::kBackward;
    Task task = LaneTask(lane, TaskKind::kSend, back ? streams::kPipelineCommBack : streams::kPipelineComm, phase);
    task.device = e.Dev(lane.replica, lane.stage, from);
    task.peer = e.Dev(to_replica, to_stage, t);
    task.bytes = bytes;
    const TaskId id = e.sched.Add(task, ls.frontier[static_cast<size_t>(from)]);
    e.MeetTransfer({lane.iteration, to_g, to_replica, t, to_mb, phase == Phase::kBackward ? 1 : 0}, id, false);
  }
}

absl::Status LinkTransfers(Expansion& e) {
  if (e.duplicate_transfer >= 0) {
    return absl::InternalError(absl::StrCat("pipeline expansion: a second transfer for the same slot: ",
                                            e.sched.Describe(e.duplicate_transfer)));
  }
  // Every pair met during the compute pass; a transfer left alone has no other side.
  if (!e.unmatched.empty()) {
    TaskId first = -1;
    for (const auto& [key, side] : e.unmatched) first = first < 0 ? side.first : std::min(first, side.first);
    const bool recv = e.sched.task(first).kind == TaskKind::kRecv;
    return absl::InternalError(absl::StrCat("pipeline expansion: no ", recv ? "send" : "receive", " for ",
                                            e.sched.Describe(first)));
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
