// Part of pass 2 (compute): data-parallel replicas that walk the same ops over the same layers
// build the same tasks, each on its own devices. Where every replica is alike (replicas_alike
// below), the compute pass walks replica 0 only and adds every later replica's tasks as copies
// of replica 0's, moved to the replica's devices, groups and task ids, with the records the
// later passes read (final backwards, first computes, optimizer kernels) moved likewise. The
// schedule is the one the walk would have built, task for task (tests/sim/replica_copy_test.cc
// compares both over many plans); the copy only skips the hooks' work.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "expand/expansion.h"

namespace testbed::expand {

// Whether every replica of every stage walks as replica 0 does: the same data-parallel degree
// on every stage, no lock-step groups (expert or context parallelism), the same op sequence,
// micro-batch shares and micro-batch numbering on every replica, and none of the features
// whose tasks or records depend on the replica (host copies, sparse embeddings, MoE layers,
// ZeRO-3 gathers, per-bucket weight gathers).
[[nodiscard]] bool ReplicasAlike(const Expansion& e);

class ReplicaCopier {
 public:
  // From replica 0's tasks, [begin, end) of the schedule (every stage of it, walked): empty
  // where a transfer is still unmatched or a group reaches outside replica 0's devices.
  [[nodiscard]] static std::optional<ReplicaCopier> From(Expansion& e, TaskId begin, TaskId end);

  // Adds replica `r`'s tasks as copies of replica 0's, after the schedule's last task, with
  // their records. Replicas are copied in order, each right after the one before (as the walk
  // adds them). False (nothing added) where replica 0's tasks reach outside its devices or
  // tasks, or replica r's devices do not correspond one to one or already have tasks.
  [[nodiscard]] bool Copy(int r);

 private:
  ReplicaCopier(Expansion& e, TaskId begin, TaskId end) : e_(e), begin_(begin), end_(end) {}

  Expansion& e_;
  TaskId begin_, end_;
  // Replica 0's devices, with (stage, tensor-parallel rank) of each: a copy costs work in
  // proportion to the replica, not to the cluster.
  std::vector<DeviceId> devices_;
  std::vector<std::pair<int, int>> places_;
  std::vector<DeviceId> to_;            // by device: the current copy's device for each of replica 0's
  std::vector<std::int32_t> groups_;    // the groups replica 0's tasks use, in order of first use
  std::vector<std::int32_t> group_to_;  // by group: the current copy's for each of them; -1 elsewhere
  std::vector<std::tuple<int, int, int, int, int>> pending_;  // replica 0's Expansion::pending_recompute
};

// On by default; off makes the compute pass walk every replica (tests and benchmarks compare).
void SetReplicaCopy(bool on) noexcept;
[[nodiscard]] bool ReplicaCopyOn() noexcept;
// Tasks added as copies so far in this process (all threads).
[[nodiscard]] std::int64_t ReplicaCopiedTasks() noexcept;

}  // namespace testbed::expand
