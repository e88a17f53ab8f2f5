// What a simulated run reports: the metrics of the iteration (time, throughput, FLOP/s and
// MFU, bubbles, exposed communication, start-up, memory) and its tables (per device, per
// link, per step, timeline), from the simulation result, the schedule and the plan that
// made it. Also the memory check that refuses a plan whose peak exceeds a device's memory.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "sim/simulator.h"
#include "testbed/metrics.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/schedule.h"

namespace testbed {

// Where each device sits in the plan (-1 for devices it does not use).
struct Placement {
  std::vector<int> stage, dp_rank, tp_rank;
};
[[nodiscard]] Placement PlaceDevices(const Plan& plan, int devices);

// ResourceExhausted naming the worst device and its shortfall when a device's peak plus
// `reserve_bytes` exceeds its memory.
[[nodiscard]] absl::Status CheckMemory(const Plan& plan, const Cluster& cluster, const SimResult& r,
                                       double reserve_bytes);

struct ReportInputs {
  const Plan& plan;
  const ModelGraph& model;
  const Cluster& cluster;
  const TrainSettings& train;
  const Schedule& schedule;
  const SimResult& result;
  double reserve_bytes = 0;
};
[[nodiscard]] MetricSet SimMetrics(const ReportInputs& in);
// per_device, per_link, per_step, and the timeline when `timeline` (else a note).
void SimTables(const ReportInputs& in, bool timeline, RunOutput& out);

}  // namespace testbed
