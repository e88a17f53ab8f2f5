#include "sim/sim_backend.h"
#include "sim/data_audit.h"
#include "engine/data_files.h"
#include "testbed/embedding_rows.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <numeric>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/planning_chain.h"
#include "engine/stage_costs.h"
#include "memory_budget.h"
#include "testbed/kept_blocks.h"
#include "sim/sim_report.h"
#include "sim/task_costs.h"
#include "sim/workload_run.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

constexpr double kGiB = 1073741824.0;

}  // namespace

absl::StatusOr<RunOutput> SimulatePlan(const Plan& plan, const ModelGraph& model, const Cluster& cluster,
                                       const TrainSettings& train, DeviceModel& device_model, Collective& collective,
                                       Scheduler& scheduler, const SimSettings& settings, bool with_tables) {
  TESTBED_RETURN_IF_ERROR(plan.Validate(static_cast<int>(model.layers.size()), cluster));
  // Blocks kept from earlier work go back to the kernel first: what this run adds is
  // measured from memory in use only.
  ReleaseKeptBlocks();
  const double resident_before = ResidentMiB();
  const auto t0 = std::chrono::steady_clock::now();
  SchedulingContext sctx{model, cluster, plan, train, device_model, settings.compression, settings.inputs,
                         static_cast<int>(std::max<std::int64_t>(1, train.steps)), settings.tokens};
  absl::StatusOr<Schedule> schedule = CallPlugin("scheduler", "", [&] { return scheduler.BuildSchedule(sctx); });
  if (!schedule.ok()) return schedule.status();
  if (settings.check_schedule) TESTBED_RETURN_IF_ERROR(schedule->Check());
  const auto t1 = std::chrono::steady_clock::now();

  SimOptions opt;
  opt.free_communication = settings.free_communication;
  opt.comm_compute_slowdown = settings.comm_compute_slowdown;
  opt.rate_updates = settings.rate_updates;
  opt.cancelled = settings.cancelled;
  opt.record_timeline = with_tables && (settings.timeline == "on" ||
                                        (settings.timeline == "auto" &&
                                         static_cast<std::int64_t>(schedule->size()) <= settings.timeline_max_tasks));
  SimInputs in{model, cluster, device_model, collective};
  TESTBED_ASSIGN_OR_RETURN(SimResult r, Simulate(*schedule, in, opt));
  const auto t2 = std::chrono::steady_clock::now();
  // The simulator's own memory: what the schedule and the simulation's state added (measured
  // while both are still held), and the process's peak so far.
  // Blocks kept for reuse (the engine's records, given back as it ended) are held, not used.
  const double resident_growth =
      std::max(0.0, ResidentMiB() - static_cast<double>(KeptBlockBytes()) / 1048576.0 - resident_before);

  std::int64_t audited = -1;
  if (settings.audit_data) {
    TESTBED_ASSIGN_OR_RETURN(const sim::AuditResult audit,
                             sim::AuditDataDependencies(*schedule, r.task_start_s, r.task_end_s));
    audited = audit.checked;
  }
  if (settings.enforce_memory) TESTBED_RETURN_IF_ERROR(CheckMemory(plan, cluster, r, settings.memory_reserve_bytes));
  const ReportInputs report{plan, model, cluster, train, *schedule, r, settings.memory_reserve_bytes};
  RunOutput out;
  out.metrics = SimMetrics(report);
  out.metrics.Add("schedule_build_s", std::chrono::duration<double>(t1 - t0).count(), "s");
  out.metrics.Add("simulation_wall_s", std::chrono::duration<double>(t2 - t1).count(), "s");
  out.metrics.Add("simulator_memory_mib", resident_growth, "MiB");
  if (audited >= 0) out.metrics.Add("audited_data_dependencies", static_cast<double>(audited), "pairs");
  out.metrics.Add("process_peak_memory_mib", PeakResidentMiB(), "MiB");
  if (with_tables) SimTables(report, opt.record_timeline, out);
  return out;
}

const BackendInfo& SimBackend::Info() {
  static const BackendInfo info = [] {
    BackendInfo b;
    b.name = "sim";
    b.doc = "discrete-event simulation of train.steps training iterations";
    b.default_metric = "throughput_samples_per_s";
    b.kinds = {{ComponentKind::kPartitioner, true, "megatron.uniform"},
               {ComponentKind::kScheduler, true, "1f1b"},
               {ComponentKind::kDeviceModel, true, "roofline"},
               {ComponentKind::kCollective, true, "auto"},
               {ComponentKind::kCompressor, false, ""}};
    AddPlanningKinds(b);
    b.sections["sim"] = {
        ParamSpec::Bool("enforce_memory", true).Doc("refuse plans whose memory peak exceeds a device's memory"),
        ParamSpec::Double("memory_reserve_gib", 0.0).Min(0).Unit("GiB").Doc("memory per device not available to training (runtime, fragmentation)"),
        ParamSpec::Bool("check_schedule", true).Doc("check the schedule for deadlock before simulating"),
        ParamSpec::Bool("free_communication", false).Doc("communication takes no time (for closed-form checks)"),
        ParamSpec::Double("comm_compute_slowdown", 0.0)
            .Range(0, 0.95)
            .Doc("share of a device's compute speed lost while communication involving it runs (the SMs and memory "
                 "bandwidth NCCL's kernels take from overlapped GEMMs); 0: overlap is free"),
        ParamSpec::Choice("rate_updates", "incremental", {"incremental", "full"})
            .Doc("how transfer rates follow a start or stop: only the changed links (incremental) or every link of every affected transfer (full, the former engine); identical results"),
        ParamSpec::Int("timeline_max_tasks", 200000).Range(0, 2147483647).Unit("tasks").Doc("largest schedule whose timeline is kept when timeline = auto"),
        ParamSpec::Choice("compress", "all", {"all", "embedding"})
            .Doc("with a compressor: compress every gradient, or the embedding's (sparse) only"),
        ParamSpec::Double("embedding_density", 0.0).Range(0, 1)
            .Doc("share of the embedding gradient's rows that are non-zero (0: expected unique tokens of a replica's batch)"),
        ParamSpec::Choice("tokens", "zipf", {"zipf", "text"})
            .Doc("where batches' tokens come from when sparse embedding communication counts the rows each batch "
                 "touches: a Zipf law over the vocabulary (token_zipf), or word sequences of the shipped text "
                 "(data/text/gpl-3.0.txt, words ranked by frequency)"),
        ParamSpec::Double("token_zipf", 1.0).Range(0, 4)
            .Doc("tokens = zipf: the law's exponent (rank r drawn with probability proportional to r^-exponent; 0 "
                 "is uniform)"),
        ParamSpec::Bool("audit_data", false)
            .Doc("check the simulated timeline: no communication starts before the data it carries exists, and no "
                 "forward before its embedding rows (a failed check fails the run)"),
    };
    b.sections["workload"] = WorkloadSchema();
    b.workload_keys = WorkloadKeys();
    return b;
  }();
  return info;
}

absl::StatusOr<std::unique_ptr<SimRun>> PrepareSimRun(const ResolvedRun& run, const Registry& registry,
                                                      const RunControl& control) {
  auto made = std::make_unique<SimRun>();
  SimRun& p = *made;
  auto make = [&](ComponentKind kind) -> const ComponentChoice& { return *run.Component(kind); };
  TESTBED_ASSIGN_OR_RETURN(p.device_model, registry.Create<DeviceModel>(make(ComponentKind::kDeviceModel).name,
                                                                        make(ComponentKind::kDeviceModel).params));
  TESTBED_ASSIGN_OR_RETURN(p.collective, registry.Create<Collective>(make(ComponentKind::kCollective).name,
                                                                     make(ComponentKind::kCollective).params));
  SimSettings& settings = p.settings;
  ParamReader read_sim(run.sections.at("sim"), "[sim]");
  settings.enforce_memory = read_sim.Get<bool>("enforce_memory");
  settings.memory_reserve_bytes = read_sim.Get<double>("memory_reserve_gib") * kGiB;
  settings.check_schedule = read_sim.Get<bool>("check_schedule");
  settings.free_communication = read_sim.Get<bool>("free_communication");
  settings.comm_compute_slowdown = read_sim.Get<double>("comm_compute_slowdown");
  settings.cancelled = control.cancelled;
  settings.rate_updates =
      read_sim.Get<std::string>("rate_updates") == "full" ? RateUpdates::kFull : RateUpdates::kIncremental;
  settings.timeline_max_tasks = read_sim.Get<std::int64_t>("timeline_max_tasks");
  settings.timeline = run.meta.timeline;
  const std::string compress = read_sim.Get<std::string>("compress");
  double density = read_sim.Get<double>("embedding_density");
  const std::string tokens = read_sim.Get<std::string>("tokens");
  p.tokens.zipf_exponent = read_sim.Get<double>("token_zipf");
  settings.audit_data = read_sim.Get<bool>("audit_data");
  TESTBED_RETURN_IF_ERROR(read_sim.status());
  if (run.model == nullptr) return made;  // a traced workload: no model, plan or scheduler
  TESTBED_ASSIGN_OR_RETURN(p.scheduler, registry.Create<Scheduler>(make(ComponentKind::kScheduler).name,
                                                                   make(ComponentKind::kScheduler).params));
  if (const ComponentChoice* c = run.Component(ComponentKind::kCompressor)) {
    TESTBED_ASSIGN_OR_RETURN(p.compressor, registry.Create<Compressor>(c->name, c->params));
    p.compression.compressor = p.compressor.get();
    p.compression.embedding_only = compress == "embedding";
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
    p.compression.embedding_density = density;
    settings.compression = &p.compression;
  }
  settings.inputs = &p.inputs;
  p.tokens.seed = run.seed;
  if (tokens == "text") {
    TESTBED_ASSIGN_OR_RETURN(const std::string text, FindData("text/gpl-3.0.txt"));
    TESTBED_ASSIGN_OR_RETURN(WordCorpus corpus, ReadWordCorpus(text));
    p.tokens.kind = TokenModel::Kind::kCorpus;
    p.tokens.corpus = std::move(corpus.ids);
  }
  settings.tokens = &p.tokens;
  PlanningContext ctx{*run.model, *run.cluster, run.train, run.parallel, *p.device_model, run.seed, {}, p.collective.get()};
  SimSettings quiet = settings;
  quiet.check_schedule = false;
  ctx.evaluate = [&](const Plan& candidate) -> absl::StatusOr<MetricSet> {
    TESTBED_ASSIGN_OR_RETURN(RunOutput o, SimulatePlan(candidate, *run.model, *run.cluster, run.train, *p.device_model,
                                                       *p.collective, *p.scheduler, quiet, false));
    return o.metrics;
  };
  TESTBED_ASSIGN_OR_RETURN(p.planned, RunPlanningChain(run, registry, ctx, p.inputs));
  return made;
}

absl::StatusOr<RunOutput> SimBackend::Run(const ResolvedRun& run, const Registry& registry,
                                          const RunControl& control) {
  TESTBED_ASSIGN_OR_RETURN(std::unique_ptr<SimRun> p, PrepareSimRun(run, registry, control));
  if (run.model == nullptr) return SimulateWorkload(run, *p);
  TESTBED_ASSIGN_OR_RETURN(RunOutput out, SimulatePlan(p->planned.plan, *run.model, *run.cluster, run.train,
                                                       *p->device_model, *p->collective, *p->scheduler, p->settings,
                                                       true));
  out.metrics.Merge(p->planned.metrics);
  out.metrics.Merge(p->planned.plan.planner_metrics);
  // A load balancer's cost model against the simulation of its placements (Pro-Prophet's
  // "cost model error"): its mean predicted MoE layer time over the simulated one.
  const Metric* predicted = out.metrics.Find("balancer_predicted_layer_s");
  const Metric* simulated = out.metrics.Find("moe_layer_time_s");
  if (predicted != nullptr && simulated != nullptr && simulated->value > 0) {
    out.metrics.Add("balancer_cost_model_error", std::abs(predicted->value - simulated->value) / simulated->value, "1",
                    Better::kLower);
  }
  for (const Table& t : p->planned.plan.planner_tables) out.tables.push_back(t);
  return out;
}

absl::StatusOr<RunSchedule> BuildRunSchedule(const ResolvedRun& run, const Registry& registry) {
  TESTBED_ASSIGN_OR_RETURN(std::unique_ptr<SimRun> p, PrepareSimRun(run, registry, RunControl{}));
  RunSchedule out;
  static const ModelGraph kNoModel;
  const ModelGraph& model = run.model != nullptr ? *run.model : kNoModel;
  if (run.model == nullptr) {
    TESTBED_ASSIGN_OR_RETURN(chakra::ImportedWorkload w, LoadWorkload(run));
    out.schedule = std::move(w.schedule);
  } else {
    const Plan& plan = p->planned.plan;
    SchedulingContext sctx{model, *run.cluster, plan, run.train, *p->device_model, p->settings.compression,
                           p->settings.inputs, static_cast<int>(std::max<std::int64_t>(1, run.train.steps))};
    absl::StatusOr<Schedule> schedule = CallPlugin("scheduler", "", [&] { return p->scheduler->BuildSchedule(sctx); });
    if (!schedule.ok()) return schedule.status();
    out.schedule = *std::move(schedule);
  }
  sim::TaskCosts costs;
  TESTBED_RETURN_IF_ERROR(costs.Prepare(out.schedule, model, *run.cluster, *p->device_model, *p->collective,
                                        p->settings.free_communication));
  out.durations = std::move(costs.duration);
  return out;
}

}  // namespace testbed
