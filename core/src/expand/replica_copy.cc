#include "expand/replica_copy.h"

#include <algorithm>
#include <atomic>
#include <type_traits>
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
  if (!e.unmatched.empty() || e.duplicate_transfer >= 0 || !e.moe_block_marks.empty() || !e.broadcast_done.empty()) {
    return std::nullopt;
  }
  ReplicaCopier c(e, begin, end);
  const size_t devices = static_cast<size_t>(e.sched.num_devices());
  c.stage_of_.assign(devices, -1);
  c.rank_of_.assign(devices, -1);
  for (int s = 0; s < e.pp; ++s) {
    for (int t = 0; t < e.plan.tp(s); ++t) {
      const DeviceId d = e.Dev(0, s, t);
      if (d < 0 || static_cast<size_t>(d) >= devices || c.stage_of_[static_cast<size_t>(d)] >= 0) return std::nullopt;
      c.stage_of_[static_cast<size_t>(d)] = s;
      c.rank_of_[static_cast<size_t>(d)] = t;
    }
  }
  auto mine = [&](DeviceId d) { return d >= 0 && static_cast<size_t>(d) < devices && c.stage_of_[static_cast<size_t>(d)] >= 0; };
  for (TaskId t = begin; t < end; ++t) {
    const Task& task = e.sched.task(t);
    if (task.replica != 0 || (task.device >= 0 && !mine(task.device)) || (task.peer >= 0 && !mine(task.peer))) {
      return std::nullopt;
    }
    if (task.device < 0 && task.group >= 0) {
      for (DeviceId d : e.sched.groups()[static_cast<size_t>(task.group)]) {
        if (!mine(d)) return std::nullopt;
      }
      if (std::find(c.groups_.begin(), c.groups_.end(), task.group) == c.groups_.end()) c.groups_.push_back(task.group);
    }
    if (task.kind == TaskKind::kRecv && (task.match < begin || task.match >= end)) return std::nullopt;
    for (TaskId d : e.sched.deps(t)) {
      if (d < begin || d >= end) return std::nullopt;
    }
  }
  for (const auto& key : e.pending_recompute) {
    if (std::get<2>(key) != 0) return std::nullopt;  // only replica 0 has walked
  }
  return c;
}

bool ReplicaCopier::Copy(int r) {
  Schedule& s = e_.sched;
  const size_t devices = stage_of_.size();
  to_.assign(devices, -1);
  std::vector<char> taken(devices, 0);
  for (size_t d = 0; d < devices; ++d) {
    if (stage_of_[d] < 0) continue;
    const DeviceId to = e_.Dev(r, stage_of_[d], rank_of_[d]);
    if (to < 0 || static_cast<size_t>(to) >= devices || taken[static_cast<size_t>(to)] || stage_of_[static_cast<size_t>(to)] >= 0) {
      return false;
    }
    taken[static_cast<size_t>(to)] = 1;
    to_[d] = to;
  }
  const TaskId offset = static_cast<TaskId>(s.size()) - begin_;
  // The copy's groups, interned in the order the walk would first use them.
  group_to_.assign(s.groups().size(), -1);
  for (std::int32_t g : groups_) {
    std::vector<DeviceId> members = s.groups()[static_cast<size_t>(g)];
    for (DeviceId& m : members) m = to_[static_cast<size_t>(m)];
    const std::int32_t to = s.Group(members);
    group_to_.resize(std::max(group_to_.size(), s.groups().size()), -1);
    group_to_[static_cast<size_t>(g)] = to;
  }
  // Nothing is added where a device of the copy already has tasks: the walk builds it then.
  if (!s.AppendCopies(begin_, end_, to_, group_to_, [r](Task& t) { t.replica = r; })) return false;
  e_.CopyDeviceRecords(to_, r, offset);
  copied.fetch_add(end_ - begin_, std::memory_order_relaxed);
  return true;
}

// The records the walk of replica 0 left on its devices, for the copy on `to` (task ids
// moved by `offset`).
void Expansion::CopyDeviceRecords(const std::vector<DeviceId>& to, int replica, TaskId offset) {
  auto moved = [&](TaskId t) { return t >= 0 ? t + offset : t; };
  for (size_t d = 0; d < to.size(); ++d) {
    const DeviceId dst = to[d];
    if (dst < 0) continue;
    for (int it = 0; it < iterations; ++it) {
      const size_t i = static_cast<size_t>(it);
      first_compute_[i][static_cast<size_t>(dst)] = moved(first_compute_[i][d]);
      std::vector<TaskId>& finals = final_bwd_[i][static_cast<size_t>(dst)];
      const std::vector<TaskId>& from = final_bwd_[i][d];
      finals.resize(from.size());
      for (size_t k = 0; k < from.size(); ++k) finals[k] = moved(from[k]);
    }
  }
  // Maps by (iteration, device): the entries of replica 0's devices, added for the copy's.
  auto copy_entries = [&](auto& by_device, auto&& move_value) {
    std::vector<std::pair<std::pair<int, DeviceId>, typename std::decay_t<decltype(by_device)>::mapped_type>> add;
    for (const auto& [key, value] : by_device) {
      const DeviceId d = key.second;
      if (d >= 0 && static_cast<size_t>(d) < to.size() && to[static_cast<size_t>(d)] >= 0) {
        add.emplace_back(std::pair(key.first, to[static_cast<size_t>(d)]), move_value(value));
      }
    }
    for (auto& [key, value] : add) by_device[key] = std::move(value);
  };
  copy_entries(optimizer_task, moved);
  copy_entries(embedding_backward, moved);
  copy_entries(forward_parts, [&](const std::vector<TaskId>& ids) {
    std::vector<TaskId> out(ids);
    for (TaskId& t : out) t = moved(t);
    return out;
  });
  std::vector<std::tuple<int, int, int, int, int>> pending;
  for (const auto& [it, s, r, c, mb] : pending_recompute) {
    if (r == 0) pending.emplace_back(it, s, replica, c, mb);
  }
  pending_recompute.insert(pending.begin(), pending.end());
}

}  // namespace testbed::expand
