#include "sim/sim_backend.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/stage_costs.h"
#include "sim/sim_report.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

constexpr double kGiB = 1073741824.0;

}  // namespace

absl::StatusOr<RunOutput> SimulatePlan(const Plan& plan, const ModelGraph& model, const Cluster& cluster,
                                       const TrainSettings& train, DeviceModel& device_model, Collective& collective,
                                       Scheduler& scheduler, const SimSettings& settings, bool with_tables) {
  TESTBED_RETURN_IF_ERROR(plan.Validate(static_cast<int>(model.layers.size()), cluster));
  const auto t0 = std::chrono::steady_clock::now();
  SchedulingContext sctx{model, cluster, plan, train, device_model, settings.compression, settings.inputs,
                         static_cast<int>(std::max<std::int64_t>(1, train.steps))};
  absl::StatusOr<Schedule> schedule = CallPlugin("scheduler", "", [&] { return scheduler.BuildSchedule(sctx); });
  if (!schedule.ok()) return schedule.status();
  if (settings.check_schedule) TESTBED_RETURN_IF_ERROR(schedule->Check());
  const auto t1 = std::chrono::steady_clock::now();

  SimOptions opt;
  opt.free_communication = settings.free_communication;
  opt.record_timeline = with_tables && (settings.timeline == "on" ||
                                        (settings.timeline == "auto" &&
                                         static_cast<std::int64_t>(schedule->size()) <= settings.timeline_max_tasks));
  SimInputs in{model, cluster, device_model, collective};
  TESTBED_ASSIGN_OR_RETURN(SimResult r, Simulate(*schedule, in, opt));
  const auto t2 = std::chrono::steady_clock::now();

  if (settings.enforce_memory) TESTBED_RETURN_IF_ERROR(CheckMemory(plan, cluster, r, settings.memory_reserve_bytes));
  const ReportInputs report{plan, model, cluster, train, *schedule, r, settings.memory_reserve_bytes};
  RunOutput out;
  out.metrics = SimMetrics(report);
  out.metrics.Add("schedule_build_s", std::chrono::duration<double>(t1 - t0).count(), "s");
  out.metrics.Add("simulation_wall_s", std::chrono::duration<double>(t2 - t1).count(), "s");
  if (with_tables) SimTables(report, opt.record_timeline, out);
  return out;
}

const BackendInfo& SimBackend::Info() {
  static const BackendInfo info = [] {
    BackendInfo b;
    b.name = "sim";
    b.doc = "discrete-event simulation of one training iteration";
    b.default_metric = "throughput_samples_per_s";
    b.kinds = {{ComponentKind::kPartitioner, true, "megatron.uniform"},
               {ComponentKind::kScheduler, true, "1f1b"},
               {ComponentKind::kDeviceModel, true, "roofline"},
               {ComponentKind::kCollective, true, "auto"},
               {ComponentKind::kCompressor, false, ""}};
    b.sections["sim"] = {
        ParamSpec::Bool("enforce_memory", true).Doc("refuse plans whose memory peak exceeds a device's memory"),
        ParamSpec::Double("memory_reserve_gib", 0.0).Min(0).Unit("GiB").Doc("memory per device not available to training (runtime, fragmentation)"),
        ParamSpec::Bool("check_schedule", true).Doc("check the schedule for deadlock before simulating"),
        ParamSpec::Bool("free_communication", false).Doc("communication takes no time (for closed-form checks)"),
        ParamSpec::Int("timeline_max_tasks", 200000).Min(0).Unit("tasks").Doc("largest schedule whose timeline is kept when timeline = auto"),
        ParamSpec::Choice("compress", "all", {"all", "embedding"})
            .Doc("with a compressor: compress every gradient, or the embedding's (sparse) only"),
        ParamSpec::Double("embedding_density", 0.0).Range(0, 1)
            .Doc("share of the embedding gradient's rows that are non-zero (0: expected unique tokens of a replica's batch)"),
    };
    return b;
  }();
  return info;
}

absl::StatusOr<RunOutput> SimBackend::Run(const ResolvedRun& run, const Registry& registry, const RunControl&) {
  auto make = [&](ComponentKind kind) -> const ComponentChoice& { return *run.Component(kind); };
  TESTBED_ASSIGN_OR_RETURN(auto device_model, registry.Create<DeviceModel>(make(ComponentKind::kDeviceModel).name,
                                                                          make(ComponentKind::kDeviceModel).params));
  TESTBED_ASSIGN_OR_RETURN(auto collective, registry.Create<Collective>(make(ComponentKind::kCollective).name,
                                                                        make(ComponentKind::kCollective).params));
  TESTBED_ASSIGN_OR_RETURN(auto scheduler, registry.Create<Scheduler>(make(ComponentKind::kScheduler).name,
                                                                      make(ComponentKind::kScheduler).params));
  const ComponentChoice& part = make(ComponentKind::kPartitioner);
  TESTBED_ASSIGN_OR_RETURN(auto partitioner, registry.Create<Partitioner>(part.name, part.params));

  SimSettings settings;
  const ParamSet& sim = run.sections.at("sim");
  settings.enforce_memory = sim.GetOr<bool>("enforce_memory", true);
  settings.memory_reserve_bytes = sim.GetOr<double>("memory_reserve_gib", 0.0) * kGiB;
  settings.check_schedule = sim.GetOr<bool>("check_schedule", true);
  settings.free_communication = sim.GetOr<bool>("free_communication", false);
  settings.timeline_max_tasks = sim.GetOr<std::int64_t>("timeline_max_tasks", 200000);
  settings.timeline = run.meta.timeline;
  std::shared_ptr<Compressor> compressor;
  GradientCompression compression;
  if (const ComponentChoice* c = run.Component(ComponentKind::kCompressor)) {
    TESTBED_ASSIGN_OR_RETURN(compressor, registry.Create<Compressor>(c->name, c->params));
    compression.compressor = compressor.get();
    compression.embedding_only = sim.GetOr<std::string>("compress", "all") == "embedding";
    double density = sim.GetOr<double>("embedding_density", 0.0);
    if (density <= 0) {
      // Distinct tokens among a replica's tokens drawn uniformly from the vocabulary:
      // V (1 - (1 - 1/V)^N), an upper bound for natural text (Zipf repeats more).
      const double v = static_cast<double>(run.model->shape.vocab);
      const int dp = run.parallel.dp > 0 ? run.parallel.dp
                                         : std::max(1, run.cluster->num_devices() / (run.parallel.tp * run.parallel.pp));
      const double n = static_cast<double>(run.train.global_batch > 0 ? run.train.global_batch : run.train.micro_batch) *
                       static_cast<double>(run.model->shape.seq_len) / dp;
      density = std::clamp(1.0 - std::pow(1.0 - 1.0 / v, n), 1e-6, 1.0);
    }
    compression.embedding_density = density;
    settings.compression = &compression;
  }

  PlanningContext ctx{*run.model, *run.cluster, run.train, run.parallel, *device_model, run.seed, {}};
  SimSettings quiet = settings;
  quiet.check_schedule = false;
  ctx.evaluate = [&](const Plan& candidate) -> absl::StatusOr<MetricSet> {
    TESTBED_ASSIGN_OR_RETURN(RunOutput o, SimulatePlan(candidate, *run.model, *run.cluster, run.train, *device_model,
                                                       *collective, *scheduler, quiet, false));
    return o.metrics;
  };
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<Plan> plan = CallPlugin("partitioner", part.name, [&] { return partitioner->Partition(ctx); });
  const double planning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!plan.ok()) return plan.status();
  TESTBED_ASSIGN_OR_RETURN(RunOutput out, SimulatePlan(*plan, *run.model, *run.cluster, run.train, *device_model,
                                                       *collective, *scheduler, settings, true));
  out.metrics.Add("planning_time_s", planning_s, "s", Better::kLower);
  out.metrics.Merge(plan->planner_metrics);
  return out;
}

}  // namespace testbed
