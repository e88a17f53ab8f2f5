#include "testbed/schedule.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace testbed {

const char* CollectiveOpName(CollectiveOp op) noexcept {
  switch (op) {
    case CollectiveOp::kAllReduce: return "allreduce";
    case CollectiveOp::kAllGather: return "allgather";
    case CollectiveOp::kReduceScatter: return "reducescatter";
    case CollectiveOp::kAllToAll: return "alltoall";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kReduce: return "reduce";
  }
  return "?";
}

TaskId Schedule::Add(const Task& task, const std::vector<TaskId>& deps) {
  Compact();
  const TaskId id = static_cast<TaskId>(tasks_.size());
  tasks_.push_back(task);
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  dep_begin_.push_back(static_cast<std::int64_t>(deps_.size()));
  auto append = [&](DeviceId d) {
    if (d < 0) return;
    if (static_cast<size_t>(d) >= order_.size()) order_.resize(static_cast<size_t>(d) + 1);
    auto& streams = order_[static_cast<size_t>(d)];
    if (streams.size() <= task.stream) streams.resize(static_cast<size_t>(task.stream) + 1);
    streams[task.stream].push_back(id);
  };
  if (task.device < 0) {
    if (task.group >= 0 && static_cast<size_t>(task.group) < groups_.size()) {
      for (DeviceId d : groups_[static_cast<size_t>(task.group)]) append(d);
    }
  } else {
    append(task.device);
  }
  return id;
}

void Schedule::AddDep(TaskId task, TaskId on) { extra_deps_.emplace_back(task, on); }

void Schedule::Compact() const {
  if (extra_deps_.empty()) return;
  std::vector<std::vector<TaskId>> added(tasks_.size());
  for (const auto& [task, on] : extra_deps_) added[static_cast<size_t>(task)].push_back(on);
  extra_deps_.clear();
  std::vector<TaskId> flat;
  std::vector<std::int64_t> begin = {0};
  for (size_t i = 0; i < tasks_.size(); ++i) {
    flat.insert(flat.end(), deps_.begin() + dep_begin_[i], deps_.begin() + dep_begin_[i + 1]);
    flat.insert(flat.end(), added[i].begin(), added[i].end());
    begin.push_back(static_cast<std::int64_t>(flat.size()));
  }
  deps_ = std::move(flat);
  dep_begin_ = std::move(begin);
}

std::span<const TaskId> Schedule::deps(TaskId id) const {
  Compact();
  const size_t i = static_cast<size_t>(id);
  return {deps_.data() + dep_begin_[i], static_cast<size_t>(dep_begin_[i + 1] - dep_begin_[i])};
}

std::int32_t Schedule::Group(const std::vector<DeviceId>& members) {
  // Groups are few (one per TP/DP/PP group); a linear scan from the back finds repeats fast
  // because builders ask for the same group many times in a row.
  for (size_t i = groups_.size(); i-- > 0;) {
    if (groups_[i] == members) return static_cast<std::int32_t>(i);
  }
  groups_.push_back(members);
  return static_cast<std::int32_t>(groups_.size() - 1);
}

const std::vector<TaskId>& Schedule::Order(DeviceId device, int stream) const {
  static const std::vector<TaskId> kEmpty;
  if (device < 0 || static_cast<size_t>(device) >= order_.size()) return kEmpty;
  const auto& streams = order_[static_cast<size_t>(device)];
  if (stream < 0 || static_cast<size_t>(stream) >= streams.size()) return kEmpty;
  return streams[static_cast<size_t>(stream)];
}

std::span<const DeviceId> Schedule::DevicesOf(TaskId id) const {
  const Task& t = task(id);
  if (t.device < 0) {
    if (t.group >= 0 && static_cast<size_t>(t.group) < groups_.size()) return groups_[static_cast<size_t>(t.group)];
    return {};
  }
  return {&t.device, 1};
}

std::string Schedule::Describe(TaskId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tasks_.size()) return absl::StrCat("task ", id, " (no such task)");
  const Task& t = task(id);
  const std::string where = absl::StrFormat("mb%d stage%d.%d", t.micro_batch, t.stage, t.chunk);
  const char* what = t.phase == Phase::kForward ? "activation" : "gradient";
  switch (t.kind) {
    case TaskKind::kCompute: {
      std::string on = absl::StrCat("device ", t.device);
      if (t.device < 0 && t.group >= 0 && static_cast<size_t>(t.group) < groups_.size()) {
        const auto& g = groups_[static_cast<size_t>(t.group)];
        on = absl::StrCat("devices {", g.size() <= 8 ? absl::StrJoin(g, ",") : absl::StrCat(g.front(), ",...,", g.back()),
                          "}");
      }
      return absl::StrFormat("task %d: %s%s %s layers [%d,%d)%s on %s", id, PhaseName(t.phase),
                             t.checkpoint ? " (checkpointed)" : "", where, t.first_layer, t.end_layer,
                             t.fraction < 1.0f ? absl::StrFormat(" x%.3g", t.fraction) : "", on);
    }
    case TaskKind::kKernel:
      return absl::StrFormat("task %d: kernel (%.3g GFLOP, %.3g GB) on device %d", id, t.flops / 1e9,
                             t.kernel_bytes / 1e9, t.device);
    case TaskKind::kSend:
      return absl::StrFormat("task %d: send %s %s from device %d to %d", id, what, where, t.device, t.peer);
    case TaskKind::kRecv:
      return absl::StrFormat("task %d: recv %s %s on device %d from %d", id, what, where, t.device, t.peer);
    case TaskKind::kCollective: {
      std::string members;
      if (t.group >= 0 && static_cast<size_t>(t.group) < groups_.size()) {
        const auto& g = groups_[static_cast<size_t>(t.group)];
        members = g.size() <= 8 ? absl::StrJoin(g, ",") : absl::StrCat(g.front(), ",...,", g.back(), " (", g.size(), ")");
      }
      return absl::StrFormat("task %d: %s %.3g MiB over devices {%s} (%s layers [%d,%d))", id, CollectiveOpName(t.op),
                             static_cast<double>(t.bytes) / 1048576.0, members, where, t.first_layer, t.end_layer);
    }
  }
  return absl::StrCat("task ", id);
}

absl::Status Schedule::Check() const {
  const TaskId n = static_cast<TaskId>(tasks_.size());
  std::vector<std::string> problems;
  auto problem = [&](std::string p) {
    if (problems.size() < 8) problems.push_back(std::move(p));
  };
  std::vector<int> received(static_cast<size_t>(n), 0);
  for (TaskId i = 0; i < n; ++i) {
    const Task& t = tasks_[static_cast<size_t>(i)];
    for (TaskId d : deps(i)) {
      if (d < 0 || d >= n || d == i) problem(absl::StrCat(Describe(i), " depends on invalid task ", d));
    }
    if (t.kind == TaskKind::kCollective || (t.kind == TaskKind::kCompute && t.device < 0)) {
      if (t.group < 0 || static_cast<size_t>(t.group) >= groups_.size() || groups_[static_cast<size_t>(t.group)].empty()) {
        problem(absl::StrCat(Describe(i), " has no group"));
      }
    } else if (t.device < 0 || t.device >= num_devices()) {
      problem(absl::StrCat(Describe(i), " has no device"));
    }
    if (t.kind == TaskKind::kRecv) {
      if (t.match < 0 || t.match >= n || tasks_[static_cast<size_t>(t.match)].kind != TaskKind::kSend) {
        problem(absl::StrCat("unmatched receive: ", Describe(i), " has no send"));
      } else {
        const Task& s = tasks_[static_cast<size_t>(t.match)];
        if (s.device != t.peer || s.peer != t.device) {
          problem(absl::StrCat(Describe(i), " is matched with ", Describe(t.match), ", whose endpoints differ"));
        }
        ++received[static_cast<size_t>(t.match)];
      }
    }
  }
  for (TaskId i = 0; i < n; ++i) {
    if (tasks_[static_cast<size_t>(i)].kind != TaskKind::kSend) continue;
    if (received[static_cast<size_t>(i)] != 1) {
      problem(absl::StrCat(received[static_cast<size_t>(i)] == 0 ? "unmatched send: " : "send received twice: ",
                           Describe(i)));
    }
  }
  if (!problems.empty()) return absl::FailedPreconditionError(absl::StrJoin(problems, "\n"));

  // Deadlock check: Kahn's algorithm over units (a send and its receive form one unit,
  // since they start together) with edges from dependencies and from stream order.
  std::vector<TaskId> unit(static_cast<size_t>(n));
  std::iota(unit.begin(), unit.end(), 0);
  for (TaskId i = 0; i < n; ++i) {
    const Task& t = tasks_[static_cast<size_t>(i)];
    if (t.kind == TaskKind::kRecv) unit[static_cast<size_t>(i)] = t.match;
  }
  std::vector<std::vector<TaskId>> out(static_cast<size_t>(n));
  std::vector<int> indeg(static_cast<size_t>(n), 0);
  auto edge = [&](TaskId from, TaskId to) {
    const TaskId a = unit[static_cast<size_t>(from)], b = unit[static_cast<size_t>(to)];
    if (a == b) return;
    out[static_cast<size_t>(a)].push_back(b);
    ++indeg[static_cast<size_t>(b)];
  };
  for (TaskId i = 0; i < n; ++i) {
    for (TaskId d : deps(i)) edge(d, i);
  }
  for (const auto& streams : order_) {
    for (const auto& list : streams) {
      for (size_t k = 1; k < list.size(); ++k) edge(list[k - 1], list[k]);
    }
  }
  std::vector<TaskId> ready;
  size_t units = 0, done = 0;
  for (TaskId i = 0; i < n; ++i) {
    if (unit[static_cast<size_t>(i)] != i) continue;
    ++units;
    if (indeg[static_cast<size_t>(i)] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    const TaskId u = ready.back();
    ready.pop_back();
    ++done;
    for (TaskId v : out[static_cast<size_t>(u)]) {
      if (--indeg[static_cast<size_t>(v)] == 0) ready.push_back(v);
    }
  }
  if (done == units) return absl::OkStatus();
  std::vector<std::string> stuck;
  for (TaskId i = 0; i < n && stuck.size() < 6; ++i) {
    if (unit[static_cast<size_t>(i)] == i && indeg[static_cast<size_t>(i)] > 0) stuck.push_back(Describe(i));
  }
  return absl::FailedPreconditionError(absl::StrCat("the schedule deadlocks: ", units - done,
                                                    " tasks wait on each other in a cycle, e.g.\n  ",
                                                    absl::StrJoin(stuck, "\n  ")));
}

}  // namespace testbed
