// Backend "sim": plans a run (the planning chain, with the simulator available to searching
// planners through PlanningContext::evaluate), builds the schedule, simulates `train.steps`
// training iterations and reports time, throughput, FLOP/s and MFU, bubbles, exposed communication,
// memory peaks (refusing plans that do not fit), link traffic and the timeline.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/planning_chain.h"
#include "testbed/compressor.h"
#include "testbed/step_inputs.h"
#include "sim/simulator.h"
#include "testbed/collective.h"
#include "testbed/device_model.h"
#include "testbed/partitioner.h"
#include "testbed/scheduler.h"

namespace testbed {

struct SimSettings {
  bool enforce_memory = true;
  double memory_reserve_bytes = 0;
  bool check_schedule = true;
  bool free_communication = false;
  double comm_compute_slowdown = 0;  // SimOptions::comm_compute_slowdown
  RateUpdates rate_updates = RateUpdates::kIncremental;
  std::function<bool()> cancelled;  // the run's RunControl::cancelled
  std::int64_t timeline_max_tasks = 200000;
  std::string timeline = "auto";  // from [experiment] timeline
  const GradientCompression* compression = nullptr;  // the run's compressor, if any
  const StepInputs* inputs = nullptr;                // per-iteration inputs the planning chain filled
  const TokenModel* tokens = nullptr;                // where batches' tokens come from (sparse embeddings)
  // Hold the simulated timeline to the data each communication needs (sim/data_audit.h).
  bool audit_data = false;
};

// Simulates `plan` with `scheduler` and returns the run's metrics and tables. The same
// function scores candidate plans for searching partitioners (tables skipped).
[[nodiscard]] absl::StatusOr<RunOutput> SimulatePlan(const Plan& plan, const ModelGraph& model, const Cluster& cluster,
                                                     const TrainSettings& train, DeviceModel& device_model,
                                                     Collective& collective, Scheduler& scheduler,
                                                     const SimSettings& settings, bool with_tables);

// A sim run's components and settings, and its plan after the planning chain (no scheduler
// and no plan for a traced workload, a run without a model).
struct SimRun {
  std::shared_ptr<DeviceModel> device_model;
  std::shared_ptr<Collective> collective;
  std::shared_ptr<Scheduler> scheduler;
  std::shared_ptr<Compressor> compressor;
  GradientCompression compression;
  StepInputs inputs;
  TokenModel tokens;
  SimSettings settings;
  PlanningOutcome planned;
};
[[nodiscard]] absl::StatusOr<std::unique_ptr<SimRun>> PrepareSimRun(const ResolvedRun& run, const Registry& registry,
                                                                    const RunControl& control);

// The schedule a sim run simulates, and the seconds of each of its compute and kernel tasks
// (the device model's): what `testbed export-chakra` writes.
struct RunSchedule {
  Schedule schedule;
  std::vector<double> durations;
};
[[nodiscard]] absl::StatusOr<RunSchedule> BuildRunSchedule(const ResolvedRun& run, const Registry& registry);

class SimBackend final : public Backend {
 public:
  [[nodiscard]] static const BackendInfo& Info();
  [[nodiscard]] const BackendInfo& info() const noexcept override { return Info(); }
  [[nodiscard]] absl::StatusOr<RunOutput> Run(const ResolvedRun& run, const Registry& registry,
                                              const RunControl& control) override;
};

}  // namespace testbed
