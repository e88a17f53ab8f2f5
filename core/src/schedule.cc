#include "testbed/schedule.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "huge_pages.h"

namespace testbed {

const char* TaskKindName(TaskKind kind) noexcept {
  switch (kind) {
    case TaskKind::kCompute: return "compute";
    case TaskKind::kKernel: return "kernel";
    case TaskKind::kSend: return "send";
    case TaskKind::kRecv: return "recv";
    case TaskKind::kCollective: return "collective";
    case TaskKind::kCopy: return "copy";
  }
  return "?";
}

const char* CollectiveOpName(CollectiveOp op) noexcept {
  switch (op) {
    case CollectiveOp::kAllReduce: return "allreduce";
    case CollectiveOp::kAllGather: return "allgather";
    case CollectiveOp::kReduceScatter: return "reducescatter";
    case CollectiveOp::kAllToAll: return "alltoall";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kReduce: return "reduce";
    case CollectiveOp::kAllToAllV: return "alltoallv";
  }
  return "?";
}

const char* KernelOpName(KernelOp op) noexcept {
  switch (op) {
    case KernelOp::kOptimizerStep: return "optimizer step";
    case KernelOp::kEncode: return "encode";
    case KernelOp::kDecode: return "decode";
    case KernelOp::kTraced: return "traced";
  }
  return "?";
}

namespace streams {
const char* Name(int s) noexcept {
  switch (s) {
    case kCompute: return "compute";
    case kTensorComm: return "tp-comm";
    case kPipelineComm: return "pp-send";
    case kDataComm: return "dp-comm";
    case kPipelineRecv: return "pp-recv";
    case kHostCopy: return "host-copy";
    case kExpertComm: return "ep-comm";
    case kParamComm: return "param-comm";
    case kParamComm2: return "param-comm-2";
    case kDataComm2: return "dp-comm-2";
    case kContextComm: return "cp-comm";
    case kSparseComm: return "sparse-comm";
    case kPipelineCommBack: return "pp-send-back";
    case kPipelineRecvBack: return "pp-recv-back";
    default: return "stream";
  }
}
}  // namespace streams

namespace {

std::size_t Mix(std::size_t h, std::uint64_t v) noexcept {
  return h ^ (static_cast<std::size_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}
std::uint64_t Bits(double d) noexcept {
  std::uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

std::size_t HashOf(const ComputeWork& w) noexcept {
  std::size_t h = 0;
  for (std::uint64_t v : {static_cast<std::uint64_t>(w.first_layer), static_cast<std::uint64_t>(w.end_layer),
                          static_cast<std::uint64_t>(w.micro_batch), Bits(static_cast<double>(w.fraction)),
                          static_cast<std::uint64_t>(w.tp), static_cast<std::uint64_t>(w.precision),
                          static_cast<std::uint64_t>(w.sequence_parallel), static_cast<std::uint64_t>(w.selective_recompute),
                          static_cast<std::uint64_t>(w.part), Bits(w.expert_tokens), Bits(static_cast<double>(w.time_share)),
                          Bits(w.activation_bytes), Bits(w.checkpoint_bytes)}) {
    h = Mix(h, v);
  }
  return h;
}
std::size_t HashOf(const KernelWork& w) noexcept {
  return Mix(Mix(Mix(Mix(static_cast<std::size_t>(w.op), Bits(w.flops)), Bits(w.bytes)), static_cast<std::uint64_t>(w.precision)),
             Bits(w.seconds));
}
std::size_t HashOf(const AllToAllVWork& w) noexcept {
  std::size_t h = w.bytes.size();
  for (std::int64_t b : w.bytes) h = Mix(h, static_cast<std::uint64_t>(b));
  return h;
}
std::size_t HashOf(const CopyWork& w) noexcept {
  return Mix(static_cast<std::size_t>(w.to_device), static_cast<std::uint64_t>(w.host + 1));
}

}  // namespace

template <typename W>
std::int32_t Schedule::Intern(std::vector<W>& table, std::unordered_map<std::size_t, std::vector<std::int32_t>>& index,
                              std::size_t hash, const W& w) {
  auto& bucket = index[hash];
  for (std::int32_t i : bucket) {
    if (table[static_cast<size_t>(i)] == w) return i;
  }
  table.push_back(w);
  bucket.push_back(static_cast<std::int32_t>(table.size() - 1));
  return bucket.back();
}

std::int32_t Schedule::AddWork(const ComputeWork& w) { return Intern(compute_, compute_index_, HashOf(w), w); }
std::int32_t Schedule::AddWork(const KernelWork& w) { return Intern(kernel_, kernel_index_, HashOf(w), w); }
std::int32_t Schedule::AddWork(const AllToAllVWork& w) { return Intern(alltoallv_, alltoallv_index_, HashOf(w), w); }
std::int32_t Schedule::AddWork(const CopyWork& w) { return Intern(copy_, copy_index_, HashOf(w), w); }

void Schedule::SetStaticBytes(DeviceId device, double bytes) {
  if (device < 0) return;
  if (static_cast<size_t>(device) >= static_bytes_.size()) static_bytes_.resize(static_cast<size_t>(device) + 1, 0.0);
  static_bytes_[static_cast<size_t>(device)] = bytes;
}

TaskId Schedule::Add(const Task& task, const std::vector<TaskId>& deps) {
  return Add(task, std::span<const TaskId>(deps));
}

TaskId Schedule::Add(const Task& task, std::span<const TaskId> deps) {
  // Dependencies added by AddDep before stay pending: the compaction puts each task's own
  // first, whenever it runs.
  const TaskId id = static_cast<TaskId>(tasks_.size());
  GrowHuge(tasks_, 1);
  GrowHuge(dep_begin_, 1);
  GrowHuge(deps_, deps.size());
  tasks_.push_back(task);
  iterations_ = std::max(iterations_, task.iteration + 1);
  micro_batch_ids_ = std::max(micro_batch_ids_, task.micro_batch + 1);
  chunk_ids_ = std::max(chunk_ids_, task.chunk + 1);
  streams_used_ = std::max(streams_used_, static_cast<int>(task.stream) + 1);
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

void Schedule::AddDep(TaskId task, TaskId on) {
  extra_deps_.emplace_back(task, on);
  ++edits_;
  compaction_.pending.store(true, std::memory_order_release);
}

void Schedule::Compact() const {
  if (!compaction_.pending.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(compaction_.mu);
  if (!compaction_.pending.load(std::memory_order_relaxed)) return;  // another reader did it
  // Each task's dependencies from Add, then those from AddDep in the order they came; in
  // place, from the back: tasks before the first one with a new dependency do not move.
  const size_t n = tasks_.size();
  std::erase_if(extra_deps_, [n](const auto& d) { return d.first < 0 || static_cast<size_t>(d.first) >= n; });
  std::stable_sort(extra_deps_.begin(), extra_deps_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t k = extra_deps_.size();
  const size_t first = k > 0 ? static_cast<size_t>(extra_deps_.front().first) : n;
  GrowHuge(deps_, k);
  deps_.resize(deps_.size() + k);
  std::int64_t old_end = dep_begin_[n];
  std::int64_t w = old_end + static_cast<std::int64_t>(k);
  size_t e = k;
  dep_begin_[n] = w;
  for (size_t i = n; i-- > first;) {
    const std::int64_t old_begin = dep_begin_[i];
    while (e > 0 && static_cast<size_t>(extra_deps_[e - 1].first) == i) deps_[static_cast<size_t>(--w)] = extra_deps_[--e].second;
    std::copy_backward(deps_.begin() + old_begin, deps_.begin() + old_end, deps_.begin() + w);
    w -= old_end - old_begin;
    dep_begin_[i] = w;
    old_end = old_begin;
  }
  extra_deps_.clear();
  // Only now may readers that do not take the lock use the compacted arrays.
  compaction_.pending.store(false, std::memory_order_release);
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
  const std::string where = t.iteration > 0 ? absl::StrFormat("it%d mb%d stage%d.%d", t.iteration, t.micro_batch, t.stage, t.chunk)
                                            : absl::StrFormat("mb%d stage%d.%d", t.micro_batch, t.stage, t.chunk);
  const char* what = t.phase == Phase::kForward ? "activation" : "gradient";
  // Where a compute or kernel task runs: its device, or its gang's members.
  std::string on = absl::StrCat("device ", t.device);
  if (t.device < 0 && t.group >= 0 && static_cast<size_t>(t.group) < groups_.size()) {
    const auto& g = groups_[static_cast<size_t>(t.group)];
    on = absl::StrCat("devices {", g.size() <= 8 ? absl::StrJoin(g, ",") : absl::StrCat(g.front(), ",...,", g.back()),
                      "}");
  }
  switch (t.kind) {
    case TaskKind::kCompute: {
      std::string part;
      if (t.work >= 0 && static_cast<size_t>(t.work) < compute_.size() &&
          compute_[static_cast<size_t>(t.work)].part != LayerPart::kWhole) {
        part = absl::StrCat(" (", LayerPartName(compute_[static_cast<size_t>(t.work)].part), ")");
      }
      return absl::StrFormat("task %d: %s%s %s layers [%d,%d)%s%s on %s", id, PhaseName(t.phase),
                             t.checkpoint ? " (checkpointed)" : "", where, t.first_layer, t.end_layer, part,
                             t.fraction < 1.0f ? absl::StrFormat(" x%.3g", t.fraction) : "", on);
    }
    case TaskKind::kKernel: {
      if (t.work < 0 || static_cast<size_t>(t.work) >= kernel_.size()) {
        return absl::StrFormat("task %d: kernel (no work entry) on %s", id, on);
      }
      const KernelWork& k = kernel_[static_cast<size_t>(t.work)];
      if (k.seconds > 0) {
        return absl::StrFormat("task %d: kernel %s (%.6g ms as given) on %s", id, KernelOpName(k.op), k.seconds * 1e3,
                               on);
      }
      return absl::StrFormat("task %d: kernel %s (%.3g GFLOP, %.3g GB) on %s", id, KernelOpName(k.op), k.flops / 1e9,
                             k.bytes / 1e9, on);
    }
    case TaskKind::kCopy: {
      const bool in = t.work < 0 || static_cast<size_t>(t.work) >= copy_.size() || copy_[static_cast<size_t>(t.work)].to_device;
      return absl::StrFormat("task %d: copy %.3g MiB %s device %d (%s)", id, static_cast<double>(t.bytes) / 1048576.0,
                             in ? "from host to" : "to host from", t.device, where);
    }
    case TaskKind::kSend:
      return absl::StrFormat("task %d: send %s %s from device %d to %d%s", id, what, where, t.device, t.peer,
                             t.links != 0 ? absl::StrCat(" on ", LinkKindsName(t.links), " links") : "");
    case TaskKind::kRecv:
      return absl::StrFormat("task %d: recv %s %s on device %d from %d", id, what, where, t.device, t.peer);
    case TaskKind::kCollective: {
      std::string members;
      if (t.group >= 0 && static_cast<size_t>(t.group) < groups_.size()) {
        const auto& g = groups_[static_cast<size_t>(t.group)];
        members = g.size() <= 8 ? absl::StrJoin(g, ",") : absl::StrCat(g.front(), ",...,", g.back(), " (", g.size(), ")");
      }
      double bytes = static_cast<double>(t.bytes);
      if (t.op == CollectiveOp::kAllToAllV && t.work >= 0 && static_cast<size_t>(t.work) < alltoallv_.size()) {
        bytes = 0;  // in all
        for (std::int64_t b : alltoallv_[static_cast<size_t>(t.work)].bytes) bytes += static_cast<double>(b);
      }
      return absl::StrFormat("task %d: %s %.3g MiB over devices {%s}%s (%s layers [%d,%d))", id, CollectiveOpName(t.op),
                             bytes / 1048576.0, members, t.links != 0 ? absl::StrCat(" on ", LinkKindsName(t.links), " links") : "",
                             where, t.first_layer, t.end_layer);
    }
  }
  return absl::StrCat("task ", id);
}

absl::StatusOr<std::vector<TaskId>> Schedule::ExecutionOrder() const {
  const size_t n = tasks_.size();
  std::vector<std::int32_t> indeg(n, 0);
  std::vector<std::vector<TaskId>> out(n);
  for (TaskId i = 0; i < static_cast<TaskId>(n); ++i) {
    for (TaskId d : deps(i)) {
      out[static_cast<size_t>(d)].push_back(i);
      ++indeg[static_cast<size_t>(i)];
    }
    // A receive comes after its send: ranks that run their tasks one by one in this order,
    // blocking in a receive or a collective, then never wait on a peer that waits on them.
    const Task& t = tasks_[static_cast<size_t>(i)];
    if (t.kind == TaskKind::kRecv && t.match >= 0) {
      out[static_cast<size_t>(t.match)].push_back(i);
      ++indeg[static_cast<size_t>(i)];
    }
  }
  for (const auto& streams : order_) {
    for (const auto& list : streams) {
      for (size_t k = 1; k < list.size(); ++k) {
        out[static_cast<size_t>(list[k - 1])].push_back(list[k]);
        ++indeg[static_cast<size_t>(list[k])];
      }
    }
  }
  std::priority_queue<TaskId, std::vector<TaskId>, std::greater<>> ready;
  for (TaskId i = 0; i < static_cast<TaskId>(n); ++i) {
    if (indeg[static_cast<size_t>(i)] == 0) ready.push(i);
  }
  std::vector<TaskId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const TaskId u = ready.top();
    ready.pop();
    order.push_back(u);
    for (TaskId v : out[static_cast<size_t>(u)]) {
      if (--indeg[static_cast<size_t>(v)] == 0) ready.push(v);
    }
  }
  if (order.size() != n) {
    return absl::FailedPreconditionError(absl::StrCat("the schedule has a cycle through ", n - order.size(),
                                                      " tasks' dependencies and stream order"));
  }
  return order;
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
    if (t.kind == TaskKind::kCollective ||
        ((t.kind == TaskKind::kCompute || t.kind == TaskKind::kKernel) && t.device < 0)) {
      if (t.group < 0 || static_cast<size_t>(t.group) >= groups_.size() || groups_[static_cast<size_t>(t.group)].empty()) {
        problem(absl::StrCat(Describe(i), " has no group"));
      }
    } else if (t.device < 0 || t.device >= num_devices()) {
      problem(absl::StrCat(Describe(i), " has no device"));
    }
    auto has_work = [&](size_t table) { return t.work >= 0 && static_cast<size_t>(t.work) < table; };
    if (t.kind == TaskKind::kCompute && !has_work(compute_.size())) problem(absl::StrCat(Describe(i), " has no compute work entry"));
    if (t.kind == TaskKind::kKernel && !has_work(kernel_.size())) problem(absl::StrCat(Describe(i), " has no kernel work entry"));
    if (t.kind == TaskKind::kCopy && !has_work(copy_.size())) problem(absl::StrCat(Describe(i), " has no copy work entry"));
    if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kAllToAllV) {
      if (!has_work(alltoallv_.size())) {
        problem(absl::StrCat(Describe(i), " has no all-to-all-v sizes"));
      } else if (t.group >= 0 && static_cast<size_t>(t.group) < groups_.size()) {
        const size_t n = groups_[static_cast<size_t>(t.group)].size();
        if (alltoallv_[static_cast<size_t>(t.work)].bytes.size() != n * n) {
          problem(absl::StrCat(Describe(i), " lists ", alltoallv_[static_cast<size_t>(t.work)].bytes.size(),
                               " sizes for a group of ", n, " (n x n expected)"));
        }
      }
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
