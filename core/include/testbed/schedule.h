// A schedule: per device, per stream, an ordered list of tasks (compute, a kernel, send and
// receive, a collective over a group, a copy between host memory and a device) with explicit
// dependencies (DESIGN.md §4). It is plain data: printed, checked for deadlock, simulated, and
// executed on real ranks.
//
// A task carries a few typed fields that every consumer reads (kind, stream, device or group,
// where it sits in the pipeline); what it does in detail lives in side tables that tasks doing
// the same work share: ComputeWork (layers, samples or expert tokens, tensor-parallel shard,
// precision, memory), KernelWork (FLOPs, bytes, precision), AllToAllVWork (bytes per sender
// and receiver), CopyWork (direction, host). So a schedule describes its own cost: the
// simulator needs the model's layers and the cluster, not the plan that produced it.
//
// Execution rule, the same in the simulator and the executor: a task starts when it is at
// the head of its stream on every device it involves (a collective is on every member's
// stream; a send and its matching receive start together) and all its dependencies have
// finished. Streams of one device run concurrently (compute overlaps communication).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/device_model.h"
#include "testbed/kept_blocks.h"

namespace testbed {

using TaskId = std::int32_t;

enum class TaskKind : std::uint8_t {
  kCompute,     // forward / backward / recompute of a range of layers for (part of) a micro-batch
  kKernel,      // a generic kernel of given FLOPs and bytes (optimizer step, compression, ...)
  kSend,        // point-to-point, to `peer`
  kRecv,        // point-to-point, from `peer`; `match` is its send
  kCollective,  // over `group`
  kCopy,        // between host memory and `device` (CopyWork says which way and which host)
};
[[nodiscard]] const char* TaskKindName(TaskKind kind) noexcept;

// kAllToAllV carries its bytes per (sender, receiver) in an AllToAllVWork; the others one
// size for every member (Task::bytes, conventions in collective.h).
enum class CollectiveOp : std::uint8_t {
  kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kAllToAllV
};
[[nodiscard]] const char* CollectiveOpName(CollectiveOp op) noexcept;

// What a kernel task does. kTraced: an operation of an imported execution trace (Chakra),
// costed as the trace gives it (KernelWork::seconds, else its FLOPs and bytes).
enum class KernelOp : std::uint8_t { kOptimizerStep, kEncode, kDecode, kTraced };
[[nodiscard]] const char* KernelOpName(KernelOp op) noexcept;

// Streams by convention; a device may use up to kCount.
namespace streams {
inline constexpr std::uint8_t kCompute = 0;
inline constexpr std::uint8_t kTensorComm = 1;    // tensor-parallel collectives that overlap compute
inline constexpr std::uint8_t kPipelineComm = 2;  // stage-to-stage sends
inline constexpr std::uint8_t kDataComm = 3;      // gradient all-reduce
// Stage-to-stage receives. Sends and receives take separate streams, as batched NCCL
// point-to-point calls do, so that a stage sending forward while its neighbour sends a
// gradient back does not wait on itself.
inline constexpr std::uint8_t kPipelineRecv = 4;
inline constexpr std::uint8_t kHostCopy = 5;     // copies between host memory and the device
inline constexpr std::uint8_t kExpertComm = 6;   // expert parallelism: token all-to-all, expert weights
inline constexpr std::uint8_t kParamComm = 7;    // sharded data parallelism (ZeRO-3): weights all-gathered before use
// HSDP: the pieces of each layer on the plan's second link class (Plan::param_links) gather
// and reduce-scatter on their own streams, beside those on the first.
inline constexpr std::uint8_t kParamComm2 = 8;
inline constexpr std::uint8_t kDataComm2 = 9;
inline constexpr std::uint8_t kContextComm = 10;  // context parallelism: keys and values gathered, their gradients reduce-scattered
// Sparse embedding communication: rows fetched from their owners, row gradients sent to them.
inline constexpr std::uint8_t kSparseComm = 11;
// Gradients' stage-to-stage sends and receives, where a program has them posted apart from the
// activations' (PipelineProgram::p2p_by_direction): Megatron's batched point-to-point calls
// post a step's sends and receives of both directions together, so neither direction waits
// behind the other's order.
inline constexpr std::uint8_t kPipelineCommBack = 12;
inline constexpr std::uint8_t kPipelineRecvBack = 13;
inline constexpr int kCount = 14;
// The link class (index into Plan::param_links.classes) whose pieces of the weights a gather
// or reduce-scatter on `stream` moves: 1 on the second class's streams, 0 on every other.
[[nodiscard]] constexpr int LinkClassOf(std::uint8_t stream) noexcept {
  return stream == kParamComm2 || stream == kDataComm2 ? 1 : 0;
}
[[nodiscard]] const char* Name(int stream) noexcept;
}  // namespace streams

// The work of a compute task on each device it occupies.
struct ComputeWork {
  std::int32_t first_layer = 0;
  std::int32_t end_layer = 0;
  std::int64_t micro_batch = 1;  // samples of the micro-batch (sequences, or rows)
  float fraction = 1.0f;          // share of the micro-batch each device runs the layers on
  std::int32_t tp = 1;       // tensor-parallel degree the layers are split over
  Precision precision = Precision::kFp16;  // arithmetic (and activation storage) precision
  bool sequence_parallel = false;
  bool selective_recompute = false;  // backward of attention recomputes its core first
  LayerPart part = LayerPart::kWhole;
  double expert_tokens = 0;  // kMoeExperts: tokens (each counted once per expert) it computes
  // The share of the whole work's time (and memory) the task takes: < 1 for one of several
  // chunks of a layer costed as a share of the layer rather than as a layer on fewer samples
  // (ExpandOptions::tp_chunk_time_share).
  float time_share = 1.0f;
  // Memory: what a forward keeps for backward, and what a checkpointed forward keeps instead.
  double activation_bytes = 0;
  double checkpoint_bytes = 0;
  friend bool operator==(const ComputeWork&, const ComputeWork&) = default;
};

// A kernel runs on `device`, or, with device -1, on every member of `group` in lock-step (a
// traced tensor-parallel gang), as long as the slowest member takes.
struct KernelWork {
  KernelOp op = KernelOp::kOptimizerStep;
  double flops = 0;
  double bytes = 0;  // through device memory
  Precision precision = Precision::kFp32;
  // > 0: the kernel takes this long (s), as measured; the device model is not asked.
  double seconds = 0;
  friend bool operator==(const KernelWork&, const KernelWork&) = default;
};

// An all-to-all-v: bytes[i * n + j] go from member i to member j of the task's group.
struct AllToAllVWork {
  std::vector<std::int64_t> bytes;
  friend bool operator==(const AllToAllVWork&, const AllToAllVWork&) = default;
};

struct CopyWork {
  bool to_device = true;  // host to device (false: device to host)
  int host = -1;          // host endpoint (Cluster::hosts) on the device's node; -1: the nearest
  friend bool operator==(const CopyWork&, const CopyWork&) = default;
};

// The typed fields every consumer reads. Fields not used by its kind keep their defaults. 72
// bytes, without padding: a large schedule holds millions.
struct Task {
  TaskKind kind = TaskKind::kCompute;
  std::uint8_t stream = streams::kCompute;
  Phase phase = Phase::kForward;  // compute; for send/recv: activation (forward) or gradient (backward)
  CollectiveOp op = CollectiveOp::kAllReduce;
  bool checkpoint = false;        // forward that keeps only its input (a recompute task follows)
  // Communication: how urgent its transfers are where links are shared. A link carries only
  // its most urgent transfers at a time, sharing its bandwidth evenly among them; the others
  // on it wait (strict priority per link, as a runtime that holds traffic back while more
  // urgent traffic is on the link: TriRace's). All 0: every transfer shares evenly.
  std::uint8_t priority = 0;
  // Collective or send: the link kinds its transfers may cross (0: any, the cluster's best
  // routes). The simulator plans it on Cluster::Over(links), so an all-gather pinned to NVLink
  // and one pinned to PCIe move at the same time without sharing a link (HSDP), and
  // one pinned to a NIC rail ("nic1") leaves the nodes through other NICs. Real
  // communicators choose their own paths and ignore it.
  LinkKinds links = 0;
  DeviceId device = -1;           // compute, kernel, send, recv, copy; -1 when the task runs on a group
  DeviceId peer = -1;             // send: destination; recv: source
  // Collective: its members. Compute with device -1: a tensor-parallel gang, the same layers
  // run by every member in lock-step (each on its shard), occupying each member's stream.
  std::int32_t group = -1;
  TaskId match = -1;              // recv: its send
  std::int32_t stage = -1;        // pipeline stage, model chunk, replica and micro-batch it belongs to
  std::int32_t chunk = 0;
  std::int32_t replica = 0;
  std::int32_t micro_batch = -1;
  std::int32_t iteration = 0;     // training step
  std::int32_t first_layer = 0;   // the layers it computes, or whose tensors it carries
  std::int32_t end_layer = 0;
  float fraction = 1.0f;          // part of the micro-batch (slices, sub-batches)
  // Sub-batches: the task runs block `sub_batch` of `sub_batches` equal blocks of its
  // micro-batch's samples (tensor-parallel overlap, groups of a per-layer degree).
  std::int16_t sub_batch = 0;
  std::int16_t sub_batches = 1;
  // Index into the side table of its kind: compute_work, kernel_work, alltoallv_work (a
  // kAllToAllV collective) or copy_work; -1 for kinds without one.
  std::int32_t work = -1;
  std::int64_t bytes = 0;         // send/recv/copy: payload; collective: per-member buffer (see Collective)
};

static_assert(sizeof(Task) == 72, "Task fields are ordered so that none pads");

class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(int num_devices) : order_(static_cast<size_t>(num_devices)), static_bytes_(static_cast<size_t>(num_devices), 0.0) {}

  // Appends a task; it joins the end of its stream on its device (every member's for a
  // collective), so each device's tasks must be added in the order that device runs them.
  TaskId Add(const Task& task, const std::vector<TaskId>& deps = {});
  // The same with its dependencies from any contiguous ids, or listed in place (`{a, b}`, or
  // `{}` for none), without a vector to build.
  TaskId Add(const Task& task, std::span<const TaskId> deps);
  TaskId Add(const Task& task, std::initializer_list<TaskId> deps) {
    return Add(task, std::span<const TaskId>(deps.begin(), deps.size()));
  }
  // Appends copies of tasks [begin, end), a part of the schedule that refers only to itself
  // (dependencies and receives' sends inside it), moved to other devices: what ran on device d
  // (or was sent to it) goes to to_device[d], a task over group g to group to_group[g]; the
  // copies' dependencies and matches point to the copies, and `edit` may change any field of
  // each but those (and its stream). The copies are what adding them one by one in order
  // would make. False, with nothing added, unless every device and group the part uses is
  // mapped, a device's tasks on each stream the part uses all lie in the part, and the copies'
  // streams are empty and distinct.
  [[nodiscard]] bool AppendCopies(TaskId begin, TaskId end, std::span<const DeviceId> to_device,
                                  std::span<const std::int32_t> to_group, absl::FunctionRef<void(Task&)> edit);
  // Adds a dependency of `task` on `on` (both already added).
  void AddDep(TaskId task, TaskId on);
  // Pairs a receive with its send (sets the receive's `match`).
  void Link(TaskId recv, TaskId send) {
    tasks_[static_cast<size_t>(recv)].match = send;
    ++edits_;
  }
  // Sets a task's Task::priority (how urgent its transfers are where links are shared).
  void SetPriority(TaskId task, std::uint8_t priority) { tasks_[static_cast<size_t>(task)].priority = priority; }
  // Interns a device group (members in rank order) and returns its index.
  std::int32_t Group(const std::vector<DeviceId>& members);
  // Interns work descriptions; tasks doing the same work share one entry.
  std::int32_t AddWork(const ComputeWork& w);
  std::int32_t AddWork(const KernelWork& w);
  std::int32_t AddWork(const AllToAllVWork& w);
  std::int32_t AddWork(const CopyWork& w);
  // Weights, gradients and optimizer state a device holds throughout (bytes).
  void SetStaticBytes(DeviceId device, double bytes);

  [[nodiscard]] int num_devices() const noexcept { return static_cast<int>(order_.size()); }
  [[nodiscard]] std::size_t size() const noexcept { return tasks_.size(); }
  [[nodiscard]] const Task& task(TaskId id) const { return tasks_[static_cast<size_t>(id)]; }
  [[nodiscard]] std::span<const Task> tasks() const noexcept { return tasks_; }
  [[nodiscard]] std::span<const TaskId> deps(TaskId id) const {
    if (compaction_.pending.load(std::memory_order_acquire)) Compact();
    const size_t i = static_cast<size_t>(id);
    return {deps_.data() + dep_begin_[i], static_cast<size_t>(dep_begin_[i + 1] - dep_begin_[i])};
  }
  [[nodiscard]] const std::vector<std::vector<DeviceId>>& groups() const noexcept { return groups_; }
  [[nodiscard]] const std::vector<ComputeWork>& compute_work() const noexcept { return compute_; }
  [[nodiscard]] const std::vector<KernelWork>& kernel_work() const noexcept { return kernel_; }
  [[nodiscard]] const std::vector<AllToAllVWork>& alltoallv_work() const noexcept { return alltoallv_; }
  [[nodiscard]] const std::vector<CopyWork>& copy_work() const noexcept { return copy_; }
  [[nodiscard]] const ComputeWork& compute(TaskId id) const { return compute_[static_cast<size_t>(task(id).work)]; }
  [[nodiscard]] const KernelWork& kernel(TaskId id) const { return kernel_[static_cast<size_t>(task(id).work)]; }
  [[nodiscard]] double static_bytes(DeviceId d) const {
    return static_cast<size_t>(d) < static_bytes_.size() ? static_bytes_[static_cast<size_t>(d)] : 0.0;
  }
  // Iterations the schedule covers (highest Task::iteration + 1).
  [[nodiscard]] int iterations() const noexcept { return iterations_; }
  // Highest Task::micro_batch + 1 and highest Task::chunk + 1 over all tasks (at least 1).
  [[nodiscard]] int micro_batch_ids() const noexcept { return micro_batch_ids_; }
  [[nodiscard]] int chunk_ids() const noexcept { return chunk_ids_; }
  // Whether iterations overlap, with no flush between them (PipeDream-2BW): such a schedule
  // runs whole, every iteration it covers at once, never one iteration repeated; and how many
  // versions of its weights a stage keeps (in-flight micro-batches run their backward on the
  // weights their forward used while newer forwards use the newest).
  void SetOverlappingIterations(bool overlapping, int weight_versions) noexcept {
    overlapping_iterations_ = overlapping;
    weight_versions_ = weight_versions;
  }
  [[nodiscard]] bool overlapping_iterations() const noexcept { return overlapping_iterations_; }
  [[nodiscard]] int weight_versions() const noexcept { return weight_versions_; }
  // Streams in use: one more than the highest stream number of any task.
  [[nodiscard]] int streams_used() const noexcept { return streams_used_; }
  // Tasks of `device` on `stream`, in order.
  [[nodiscard]] const std::vector<TaskId>& Order(DeviceId device, int stream) const;
  // Devices a task occupies: its device, or its group's members.
  [[nodiscard]] std::span<const DeviceId> DevicesOf(TaskId id) const;

  // "fwd mb3 stage2.0 layers [10,20) on device 5", "allreduce 12.0 MiB over group 4 (devices 0-7)".
  [[nodiscard]] std::string Describe(TaskId id) const;

  // One order of every task that respects dependencies, stream order and each receive after
  // its send, taking the lowest task id whenever several are ready (so a schedule whose
  // dependencies all point back is in id order). A rank running its own tasks in this order,
  // each to completion, never waits on a peer that waits on it: the executor's order.
  // FailedPrecondition on a cycle.
  [[nodiscard]] absl::StatusOr<std::vector<TaskId>> ExecutionOrder() const;

  // Checks the schedule can run: dependencies name existing tasks, every receive matches one
  // send with the same endpoints and every send is received once, groups are non-empty,
  // work entries exist for kinds that need them (an all-to-all-v has n x n sizes), and
  // there is no cycle through dependencies, stream order, collectives and send/receive pairs
  // (which would deadlock). The error names the tasks involved.
  [[nodiscard]] absl::Status Check() const;

 private:
  void Compact() const;
  template <typename W>
  std::int32_t Intern(std::vector<W>& table, std::unordered_map<std::size_t, std::vector<std::int32_t>>& index,
                      std::size_t hash, const W& w);

  std::vector<Task, BlockAllocator<Task>> tasks_;  // kept for the next schedule when freed
  // Dependencies in CSR form (tasks are added in order with their dependencies); those
  // added later by AddDep wait in extra_deps_ until the next read compacts them in.
  mutable std::vector<std::int64_t, BlockAllocator<std::int64_t>> dep_begin_ = {0};
  mutable std::vector<TaskId, BlockAllocator<TaskId>> deps_;
  mutable std::vector<std::pair<TaskId, TaskId>> extra_deps_;
  // The first read after an AddDep compacts; several threads may read at once (the
  // executor's ranks share one schedule), so the compaction runs once, under a lock.
  struct CompactionGuard {
    std::mutex mu;
    std::atomic<bool> pending{false};
    CompactionGuard() = default;
    CompactionGuard(const CompactionGuard& o) : pending(o.pending.load()) {}
    CompactionGuard& operator=(const CompactionGuard& o) {
      pending.store(o.pending.load());
      return *this;
    }
  };
  mutable CompactionGuard compaction_;
  // What AppendCopies found checking its last part (CheckCopyPart), kept for the next copy
  // of the same part while `edits` (AddDep and Link calls) is unchanged.
  struct CopyPart {
    struct List {
      DeviceId device;
      std::uint8_t stream;
    };
    TaskId begin = -1, end = -1;
    std::uint64_t edits = 0;
    std::size_t dep_count = 0;
    std::vector<List> lists;            // the (device, stream) lists its tasks fill
    std::vector<DeviceId> peers;        // devices its transfers go to or come from
    std::vector<std::int32_t> groups;   // groups its gangs and collectives run on
  };
  [[nodiscard]] bool CheckCopyPart(TaskId begin, TaskId end, CopyPart& part) const;
  CopyPart copy_part_;
  std::uint64_t edits_ = 0;
  std::vector<std::vector<DeviceId>> groups_;
  std::vector<std::vector<std::vector<TaskId>>> order_;  // [device][stream] -> tasks
  std::vector<ComputeWork> compute_;
  std::vector<KernelWork> kernel_;
  std::vector<AllToAllVWork> alltoallv_;
  std::vector<CopyWork> copy_;
  std::unordered_map<std::size_t, std::vector<std::int32_t>> compute_index_, kernel_index_, alltoallv_index_, copy_index_;
  std::vector<double> static_bytes_;
  int iterations_ = 1;
  int micro_batch_ids_ = 1, chunk_ids_ = 1;
  int streams_used_ = 0;
  bool overlapping_iterations_ = false;
  int weight_versions_ = 1;
};

}  // namespace testbed
