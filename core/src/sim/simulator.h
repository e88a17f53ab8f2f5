// The discrete-event simulator (DESIGN.md §4): runs a Schedule on a modelled cluster.
// Each device has streams that run their tasks in order and overlap each other; compute
// tasks take the device model's time; communication tasks (transfers, collectives, host
// copies) follow the collective model's phases over the cluster's links, and transfers that
// share a link share its bandwidth fairly (progressive re-rating whenever a transfer starts
// or ends). The schedule describes its own work (schedule.h), so the simulator needs the
// model's layers and the cluster, not the plan. Deterministic: ties are broken by the order
// events were created.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/collective.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/schedule.h"

namespace testbed {

struct SimInputs {
  const ModelGraph& model;
  const Cluster& cluster;
  const DeviceModel& device_model;
  const Collective& collective;
};

// How transfer rates are brought up to date when a transfer starts or stops (link_sharing.h):
// both give bit-identical results; kFull is the former engine, kept as the reference (it also
// moves transfers over private links, sim/private_links.h, through the sharing bookkeeping).
enum class RateUpdates : std::uint8_t { kIncremental, kFull };

struct SimOptions {
  bool record_timeline = false;
  // Free communication: every transfer and collective takes no time (closed-form checks).
  bool free_communication = false;
  // > 0: every device is a thread of one machine with this many cores (the executor's ranks).
  // Compute and kernel tasks then share the cores: with n running (a gang counts each
  // member), each progresses at min(1, cores / n) of its full speed (processor sharing).
  // 0: every device computes on its own.
  int shared_cores = 0;
  // In [0, 1): while communication involving a device runs, compute on that device runs at
  // 1 - this of its speed (NCCL's kernels take SMs and memory bandwidth from the GEMMs they
  // overlap; sim/comm_contention.h). 0: communication costs compute nothing. Not together
  // with shared_cores.
  double comm_compute_slowdown = 0;
  RateUpdates rate_updates = RateUpdates::kIncremental;
  // Polled every 65,536 events (and before the first): true ends the simulation with
  // Cancelled (an interrupted `testbed run`).
  std::function<bool()> cancelled;
};

struct SimDeviceStats {
  double compute_s = 0;       // compute stream running compute or kernel tasks
  double comm_s = 0;          // some communication running
  double exposed_comm_s = 0;  // communication running while no compute runs
  double idle_s = 0;          // neither (pipeline bubbles, waiting)
  double static_bytes = 0;    // weights, gradients, optimizer state
  double memory_peak_bytes = 0;
  int max_micro_batches_held = 0;  // most micro-batches with activations alive at once
};

struct SimLinkStats {
  double bytes = 0;
  double busy_s = 0;  // time with at least one transfer on it
};

struct TimelineEvent {
  TaskId task = 0;
  DeviceId device = 0;
  std::uint8_t stream = 0;
  double start_s = 0;
  double end_s = 0;
};

struct SimResult {
  double iteration_time_s = 0;  // the whole schedule: every iteration it covers
  // When each iteration's last task ended (one entry per iteration of the schedule).
  std::vector<double> iteration_end_s;
  std::vector<SimDeviceStats> devices;  // by DeviceId (devices outside the plan stay zero)
  std::vector<SimLinkStats> links;      // by LinkId
  std::vector<TimelineEvent> timeline;  // when recorded
  std::vector<double> task_start_s, task_end_s;
  std::int64_t tasks = 0;
};

// Errors: the device or collective model fails on a task (the message names the task), or
// the schedule deadlocks at run time (the message names the blocked tasks).
[[nodiscard]] absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const SimInputs& inputs,
                                                 const SimOptions& options);

}  // namespace testbed
