// A schedule: per device, per stream, an ordered list of tasks (compute, send/receive, a
// collective over a group, a generic kernel) with explicit dependencies (DESIGN.md §4). It
// is plain data: printed, checked for deadlock, simulated, and executed on real ranks.
//
// Execution rule, the same in the simulator and the executor: a task starts when it is at
// the head of its stream on every device it involves (a collective is on every member's
// stream; a send and its matching receive start together) and all its dependencies have
// finished. Streams of one device run concurrently (compute overlaps communication).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "testbed/cluster.h"
#include "testbed/device_model.h"

namespace testbed {

using TaskId = std::int32_t;

enum class TaskKind : std::uint8_t {
  kCompute,     // forward / backward / recompute of a range of layers for (part of) a micro-batch
  kKernel,      // a generic kernel of given FLOPs and bytes (optimizer step, compression, ...)
  kSend,        // point-to-point, to `peer`
  kRecv,        // point-to-point, from `peer`; `match` is its send
  kCollective,  // over `group`
};

enum class CollectiveOp : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce };

// What a kernel task does.
enum class KernelOp : std::uint8_t { kOptimizerStep, kEncode, kDecode };
[[nodiscard]] const char* CollectiveOpName(CollectiveOp op) noexcept;

// Streams by convention; a device may use any small number.
namespace streams {
inline constexpr std::uint8_t kCompute = 0;
inline constexpr std::uint8_t kTensorComm = 1;    // tensor-parallel collectives that overlap compute
inline constexpr std::uint8_t kPipelineComm = 2;  // stage-to-stage sends
inline constexpr std::uint8_t kDataComm = 3;      // gradient all-reduce
// Stage-to-stage receives. Sends and receives take separate streams, as batched NCCL
// point-to-point calls do, so that a stage sending forward while its neighbour sends a
// gradient back does not wait on itself.
inline constexpr std::uint8_t kPipelineRecv = 4;
inline constexpr int kCount = 5;
}  // namespace streams

// What a task does. Fields not used by its kind keep their defaults.
struct Task {
  TaskKind kind = TaskKind::kCompute;
  std::uint8_t stream = streams::kCompute;
  Phase phase = Phase::kForward;  // compute; for send/recv: activation (forward) or gradient (backward)
  CollectiveOp op = CollectiveOp::kAllReduce;
  bool checkpoint = false;        // forward that keeps only its input (a recompute task follows)
  DeviceId device = -1;           // compute, kernel, send, recv; -1 when the task runs on a group
  DeviceId peer = -1;             // send: destination; recv: source
  // Collective: its members. Compute with device -1: a tensor-parallel gang, the same layers
  // run by every member in lock-step (each on its shard), occupying each member's stream.
  std::int32_t group = -1;
  TaskId match = -1;              // recv: its send
  std::int32_t stage = -1;        // pipeline stage, model chunk and micro-batch it belongs to
  std::int32_t chunk = 0;
  std::int32_t micro_batch = -1;
  std::int32_t first_layer = 0;   // compute: the layers; collectives: the layers whose tensors it carries
  std::int32_t end_layer = 0;
  float fraction = 1.0f;          // part of the micro-batch (slices, sub-batches)
  std::int64_t bytes = 0;         // send/recv: payload; collective: per-member buffer (see Collective)
  double flops = 0;               // kernel
  double kernel_bytes = 0;        // kernel
  KernelOp kernel = KernelOp::kOptimizerStep;  // kernel: an optimizer step or gradient compression
};

class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(int num_devices) : order_(static_cast<size_t>(num_devices)) {}

  // Appends a task; it joins the end of its stream on its device (every member's for a
  // collective), so each device's tasks must be added in the order that device runs them.
  TaskId Add(const Task& task, const std::vector<TaskId>& deps = {});
  // Adds a dependency of `task` on `on` (both already added).
  void AddDep(TaskId task, TaskId on);
  // Pairs a receive with its send (sets the receive's `match`).
  void Link(TaskId recv, TaskId send) { tasks_[static_cast<size_t>(recv)].match = send; }
  // Interns a device group (members in rank order) and returns its index.
  std::int32_t Group(const std::vector<DeviceId>& members);

  [[nodiscard]] int num_devices() const noexcept { return static_cast<int>(order_.size()); }
  [[nodiscard]] std::size_t size() const noexcept { return tasks_.size(); }
  [[nodiscard]] const Task& task(TaskId id) const { return tasks_[static_cast<size_t>(id)]; }
  [[nodiscard]] const std::vector<Task>& tasks() const noexcept { return tasks_; }
  [[nodiscard]] std::span<const TaskId> deps(TaskId id) const;
  [[nodiscard]] const std::vector<std::vector<DeviceId>>& groups() const noexcept { return groups_; }
  // Tasks of `device` on `stream`, in order.
  [[nodiscard]] const std::vector<TaskId>& Order(DeviceId device, int stream) const;
  // Devices a task occupies: its device, or its group's members.
  [[nodiscard]] std::span<const DeviceId> DevicesOf(TaskId id) const;

  // "fwd mb3 stage2.0 layers [10,20) on device 5", "allreduce 12.0 MiB over group 4 (devices 0-7)".
  [[nodiscard]] std::string Describe(TaskId id) const;

  // Checks the schedule can run: dependencies name existing tasks, every receive matches one
  // send with the same endpoints and every send is received once, groups are non-empty,
  // and there is no cycle through dependencies, stream order, collectives and send/receive
  // pairs (which would deadlock). The error names the tasks involved.
  [[nodiscard]] absl::Status Check() const;

 private:
  void Compact() const;

  std::vector<Task> tasks_;
  // Dependencies in CSR form (tasks are added in order with their dependencies); those
  // added later by AddDep wait in extra_deps_ until the next read compacts them in.
  mutable std::vector<std::int64_t> dep_begin_ = {0};
  mutable std::vector<TaskId> deps_;
  mutable std::vector<std::pair<TaskId, TaskId>> extra_deps_;
  std::vector<std::vector<DeviceId>> groups_;
  std::vector<std::vector<std::vector<TaskId>>> order_;  // [device][stream] -> tasks
};

}  // namespace testbed
