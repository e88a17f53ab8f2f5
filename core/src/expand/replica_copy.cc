#include "expand/replica_copy.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "expand/param_gather.h"
#include "expand/sparse_embedding.h"

namespace testbed::expand {
namespace {

std::atomic<bool> copy_on{true};
std::atomic<std::int64_t> copied{0};

bool SameOp(const PipelineOp& a, const PipelineOp& b) {
  return a.kind == b.kind && a.chunk == b.chunk && a.micro_batch == b.micro_batch && a.checkpoint == b.checkpoint &&
         a.iteration == b.iteration;
}

bool ReplicaWalksAsFirst(const Expansion& e, int s, int r) {
  const std::vector<PipelineOp>& first = e.OpsOf(s, 0);
  const std::vector<PipelineOp>& ops = e.OpsOf(s, r);
  if (ops.size() != first.size()) return false;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (!SameOp(ops[k], first[k]) || e.IsFinalBackward(s, r, k) != e.IsFinalBackward(s, 0, k)) return false;
    if (ops[k].kind != PipelineOp::Kind::kOptimizerStep &&
        e.Fraction(s, r, ops[k].micro_batch) != e.Fraction(s, 0, ops[k].micro_batch)) {
      return false;
    }
  }
  // Sends and receives find their peers by global micro-batch: a replica's must start at the
  // same number on every stage, as replica 0's do.
  return e.GlobalMicroBatch(s, r, 0) == e.GlobalMicroBatch(0, r, 0);
}

}  // namespace

void SetReplicaCopy(bool on) noexcept { copy_on.store(on, std::memory_order_relaxed); }
bool ReplicaCopyOn() noexcept { return copy_on.load(std::memory_order_relaxed); }
std::int64_t ReplicaCopiedTasks() noexcept { return copied.load(std::memory_order_relaxed); }

bool ReplicasAlike(const Expansion& e) {
  const int dp = e.plan.dp(0);
  if (dp < 2 || e.plan.cp() > 1 || e.TracksForwards()) return false;
  for (const Layer& l : e.model.layers) {
    if (l.kind == LayerKind::kMoe) return false;
  }
  for (int l = 0; l < static_cast<int>(e.model.layers.size()); ++l) {
    if (SparseEmbedding(e, l)) return false;
  }
  for (int it = 0; it < e.iterations; ++it) {
    const StepInput& in = e.Inputs(it);
    if (!in.copies.empty() || !in.routing.empty() || !in.placement.empty() || !in.embedding_rows.empty()) return false;
  }
  for (int s = 0; s < e.pp; ++s) {
    if (e.plan.dp(s) != dp || ShardsParameters(e, s) || e.GlobalMicroBatch(s, 0, 0) != e.GlobalMicroBatch(0, 0, 0)) {
      return false;
    }
    for (int r = 1; r < dp; ++r) {
      if (!ReplicaWalksAsFirst(e, s, r)) return false;
    }
  }
  return true;
}

std::optional<ReplicaCopier> ReplicaCopier::From(Expansion& e, TaskId begin, TaskId end) {
  if (!e.unmatched.empty() || e.duplicate_transfer >= 0) return std::nullopt;
  for (const auto& key : e.pending_recompute) {
    if (std::get<2>(key) != 0) return std::nullopt;  // only replica 0 has walked
  }
  ReplicaCopier c(e, begin, end);
  // Replica 0's forwards still waiting for their recompute (none where every forward has its
  // backward in the walk): each copy's wait likewise.
  c.pending_.assign(e.pending_recompute.begin(), e.pending_recompute.end());
  const size_t devices = static_cast<size_t>(e.sched.num_devices());
  std::vector<char> mine(devices, 0);
  for (int s = 0; s < e.pp; ++s) {
    for (int t = 0; t < e.plan.tp(s); ++t) {
      const DeviceId d = e.Dev(0, s, t);
      if (d < 0 || static_cast<size_t>(d) >= devices || mine[static_cast<size_t>(d)]) return std::nullopt;
      mine[static_cast<size_t>(d)] = 1;
      c.devices_.push_back(d);
      c.places_.emplace_back(s, t);
    }
  }
  auto ours = [&](DeviceId d) { return d >= 0 && static_cast<size_t>(d) < devices && mine[static_cast<size_t>(d)]; };
  // The groups the part uses, whose copies each Copy interns first (a group reaching outside
  // replica 0 would intern a wrong one). Devices, peers, matches and dependencies outside the
  // part are Schedule::AppendCopies' to refuse.
  std::int32_t top_group = -1;
  for (TaskId t = begin; t < end; ++t) {
    const Task& task = e.sched.task(t);
    if (task.replica != 0) return std::nullopt;
    if (task.device < 0 && task.group >= 0) {
      for (DeviceId d : e.sched.groups()[static_cast<size_t>(task.group)]) {
        if (!ours(d)) return std::nullopt;
      }
      if (std::find(c.groups_.begin(), c.groups_.end(), task.group) == c.groups_.end()) c.groups_.push_back(task.group);
      top_group = std::max(top_group, task.group);
    }
  }
  c.to_.assign(devices, -1);
  c.group_to_.assign(static_cast<size_t>(top_group + 1), -1);
  return c;
}

bool ReplicaCopier::Copy(int r) {
  Schedule& s = e_.sched;
  const size_t devices = to_.size();
  for (size_t k = 0; k < devices_.size(); ++k) {
    const DeviceId to = e_.Dev(r, places_[k].first, places_[k].second);
    if (to < 0 || static_cast<size_t>(to) >= devices) return false;
    to_[static_cast<size_t>(devices_[k])] = to;
  }
  const TaskId offset = static_cast<TaskId>(s.size()) - begin_;
  // The copy's groups, interned in the order the walk would first use them.
  for (std::int32_t g : groups_) {
    std::vector<DeviceId> members = s.groups()[static_cast<size_t>(g)];
    for (DeviceId& m : members) m = to_[static_cast<size_t>(m)];
    group_to_[static_cast<size_t>(g)] = s.Group(members);
  }
  // Nothing is added where a device of the copy already has tasks (or two of replica 0's
  // would share one): the walk builds it then.
  if (!s.AppendCopies(begin_, end_, to_, group_to_, [r](Task& t) { t.replica = r; })) return false;
  e_.CopyDeviceRecords(devices_, to_, offset);
  for (auto [it, stage, replica, chunk, mb] : pending_) e_.pending_recompute.emplace(it, stage, r, chunk, mb);
  copied.fetch_add(end_ - begin_, std::memory_order_relaxed);
  return true;
}

// The records the walk of replica 0 left on its devices, for the copy (device d's on to[d],
// task ids moved by `offset`).
void Expansion::CopyDeviceRecords(const std::vector<DeviceId>& from, const std::vector<DeviceId>& to, TaskId offset) {
  auto moved = [&](TaskId t) { return t >= 0 ? t + offset : t; };
  for (const DeviceId d : from) {
    const size_t src = static_cast<size_t>(d), dst = static_cast<size_t>(to[src]);
    for (int it = 0; it < iterations; ++it) {
      const size_t i = static_cast<size_t>(it);
      first_compute_[i][dst] = moved(first_compute_[i][src]);
      std::vector<TaskId>& finals = final_bwd_[i][dst];
      const std::vector<TaskId>& given = final_bwd_[i][src];
      finals.resize(given.size());
      for (size_t k = 0; k < given.size(); ++k) finals[k] = moved(given[k]);
      const std::pair<int, DeviceId> key(it, d), copy(it, to[src]);
      if (auto found = optimizer_task.find(key); found != optimizer_task.end()) optimizer_task[copy] = moved(found->second);
      if (auto found = embedding_backward.find(key); found != embedding_backward.end()) {
        embedding_backward[copy] = moved(found->second);
      }
      if (auto found = forward_parts.find(key); found != forward_parts.end()) {
        std::vector<TaskId> parts = found->second;
        for (TaskId& t : parts) t = moved(t);
        forward_parts[copy] = std::move(parts);
      }
    }
  }
}

}  // namespace testbed::expand
