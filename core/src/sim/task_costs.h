// What every task of a schedule costs, before the event engine runs it: compute and kernel
// durations from the device model (cached per work entry and device type: most tasks repeat
// for every micro-batch and replica) and the communication plan of every transfer, collective
// and copy from the collective model (cached per distinct transfer); and, read when a compute
// task starts and ends, the memory it takes and gives back. Reads only the schedule, the
// model's layers and the cluster.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "sim/private_books.h"
#include "sim/private_links.h"
#include "testbed/cluster.h"
#include "testbed/collective.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/schedule.h"

namespace testbed::sim {

// The memory a compute task of `work` takes when it starts, and what it gives back (negative)
// or keeps when it ends: a forward holds its activations (a checkpointing one keeps only its
// input), a recomputation holds them again from the checkpoint, a backward frees them.
struct MemoryChange {
  double start = 0, end = 0;
};
[[nodiscard]] inline MemoryChange MemoryOf(Phase phase, bool checkpoint, const ComputeWork& w) noexcept {
  switch (phase) {
    case Phase::kForward:
      return {w.activation_bytes, checkpoint ? w.checkpoint_bytes - w.activation_bytes : 0.0};
    case Phase::kRecompute:
      return {w.activation_bytes, -w.checkpoint_bytes};
    case Phase::kBackward:
      return {0.0, -w.activation_bytes};
  }
  return {};
}

// A distinct transfer's plan, as the engine reads it.
struct PlannedComm {
  CommPlan plan;
  // Set by TaskCosts::MarkFixed: its bytes move `transfer_s` after its one phase's latency,
  // whatever else runs (a phase over private links only: sim/private_links.h).
  bool fixed = false;
  double transfer_s = 0;
  // Set by the engine for a fixed plan: where its transfers' link statistics are booked.
  PrivateBooks::Books books;
};

struct TaskCosts {
  std::vector<double> duration;           // compute and kernel tasks, on their own
  std::vector<const PlannedComm*> comm;   // sends, collectives, copies (null: free); Prepare only

  // Fills both vectors for `schedule`, and tells `private_links` (when given) every transfer
  // on its streams. Errors name the task whose model failed.
  [[nodiscard]] absl::Status Prepare(const Schedule& schedule, const ModelGraph& model, const Cluster& cluster,
                                     const DeviceModel& device_model, const Collective& collective,
                                     bool free_communication, PrivateLinks* private_links = nullptr);

  // The same, a task at a time, for a caller that walks the tasks itself and keeps the plans
  // (`comm` stays empty): Begin; then Cost for every task in id order, giving its plan (null
  // for compute and kernel tasks, receives and free transfers); then End. `plan_of(send)`
  // gives the plan Cost gave an earlier send: a receive's Cost asks for its send's when the
  // send came before it, End for the rest. The arguments of Begin must outlive End.
  using PlanOf = absl::FunctionRef<const PlannedComm*(TaskId send)>;
  void Begin(const Schedule& schedule, const ModelGraph& model, const Cluster& cluster,
             const DeviceModel& device_model, const Collective& collective, bool free_communication,
             PrivateLinks* private_links);
  [[nodiscard]] absl::Status Cost(TaskId t, const PlannedComm*& plan, PlanOf plan_of);
  void End(PlanOf plan_of);

  // Marks each plan of one phase whose transfer time `fixed(phase)` gives (a double, or
  // nullopt where others can change it) as PlannedComm::fixed.
  template <typename F>
  void MarkFixed(F&& fixed) {
    for (auto& [key, planned] : plans_) {
      const std::optional<double> s =
          planned->plan.phases.size() == 1 ? fixed(planned->plan.phases.front()) : std::nullopt;
      planned->fixed = s.has_value();
      planned->transfer_s = s.value_or(0.0);
    }
  }
  // Every plan made since Begin, in no particular order.
  template <typename F>
  void ForEachPlan(F&& f) {
    for (auto& [key, planned] : plans_) f(*planned);
  }

 private:
  // On what Begin was given.
  absl::Status ComputeCost(TaskId t);
  absl::Status CommCost(TaskId t, const PlannedComm*& plan);
  // A receive and its send's plan: the transfer holds the receive's stream too.
  void AddTransfer(TaskId recv, const PlannedComm* send_plan);

  // What Begin was given.
  const Schedule* s_ = nullptr;
  const ModelGraph* model_ = nullptr;
  const Cluster* cluster_ = nullptr;
  const DeviceModel* dm_ = nullptr;
  const Collective* collective_ = nullptr;
  bool free_ = false;
  PrivateLinks* private_ = nullptr;
  // Receives added before their sends, told to the private links at End.
  std::vector<TaskId> early_receives_;
  // The last plan of a collective or copy told to the private links, and its stream.
  const PlannedComm* told_plan_ = nullptr;
  std::uint8_t told_stream_ = 0;

  // Seconds per (work, device type, phase) and (work, device type); NaN until computed.
  std::vector<double> compute_cache_, kernel_cache_;
  size_t specs_ = 1;
  // Per group: its members' device type where they all have the same one, else -1 (a gang
  // of one type is costed once instead of once per member).
  std::vector<int> group_spec_;
  // The cluster over some link kinds, for tasks pinned to them (one view per set of kinds).
  const Cluster& View(const Cluster& cluster, LinkKinds kinds);

  // One plan per distinct transfer: (op, group, bytes, device, peer, work, link kinds).
  using PlanKey = std::tuple<int, std::int32_t, std::int64_t, DeviceId, DeviceId, std::int32_t, int>;
  struct PlanKeyHash {
    size_t operator()(const PlanKey& k) const noexcept {
      std::uint64_t h = 0;
      const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 0x9E3779B97F4A7C15ULL; };
      mix(static_cast<std::uint64_t>(std::get<0>(k)));
      mix(static_cast<std::uint64_t>(std::get<1>(k)));
      mix(static_cast<std::uint64_t>(std::get<2>(k)));
      mix(static_cast<std::uint64_t>(std::get<3>(k)));
      mix(static_cast<std::uint64_t>(std::get<4>(k)));
      mix(static_cast<std::uint64_t>(std::get<5>(k)));
      mix(static_cast<std::uint64_t>(std::get<6>(k)));
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  absl::flat_hash_map<PlanKey, std::unique_ptr<PlannedComm>, PlanKeyHash> plans_;
  // The last two plans looked up per group (collectives) and per device (transfers and
  // copies), the latest first: consecutive tasks of a group mostly repeat one, and a stage's
  // sends alternate between two (activations forward, gradients back); both skip the table.
  struct Recent {
    struct Entry {
      PlanKey key{-3, -1, -1, -1, -1, -1, -1};
      const PlannedComm* plan = nullptr;
    };
    std::array<Entry, 2> entries;
    // The plan of `key` if one of the two is it (and now the latest), else null.
    [[nodiscard]] const PlannedComm* Find(const PlanKey& key) noexcept {
      if (entries[0].plan != nullptr && entries[0].key == key) return entries[0].plan;
      if (entries[1].plan != nullptr && entries[1].key == key) {
        std::swap(entries[0], entries[1]);
        return entries[0].plan;
      }
      return nullptr;
    }
    void Note(const PlanKey& key, const PlannedComm* plan) noexcept {
      entries[1] = entries[0];
      entries[0] = Entry{key, plan};
    }
  };
  std::vector<Recent> recent_group_, recent_device_;
  std::map<LinkKinds, Cluster> views_;
};

}  // namespace testbed::sim
