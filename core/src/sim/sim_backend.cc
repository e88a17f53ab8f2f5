#include "sim/sim_backend.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/stage_costs.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

constexpr double kGiB = 1073741824.0;

const char* StreamName(int s) {
  switch (s) {
    case streams::kCompute: return "compute";
    case streams::kTensorComm: return "tp-comm";
    case streams::kPipelineComm: return "pp-send";
    case streams::kDataComm: return "dp-comm";
    case streams::kPipelineRecv: return "pp-recv";
    default: return "stream";
  }
}

const char* KindLabel(TaskKind k) {
  switch (k) {
    case TaskKind::kCompute: return "compute";
    case TaskKind::kKernel: return "kernel";
    case TaskKind::kSend: return "send";
    case TaskKind::kRecv: return "recv";
    case TaskKind::kCollective: return "collective";
  }
  return "?";
}

// Where each device sits in the plan: stage, data-parallel rank, tensor-parallel rank.
struct Placement {
  std::vector<int> stage, dp_rank, tp_rank;
};
Placement PlaceDevices(const Plan& plan, int devices) {
  Placement p;
  p.stage.assign(static_cast<size_t>(devices), -1);
  p.dp_rank.assign(static_cast<size_t>(devices), -1);
  p.tp_rank.assign(static_cast<size_t>(devices), -1);
  for (int d = 0; d < plan.dp; ++d) {
    for (int s = 0; s < plan.pp; ++s) {
      for (int t = 0; t < plan.tp; ++t) {
        const size_t dev = static_cast<size_t>(plan.DeviceOf(d, s, t));
        p.stage[dev] = s;
        p.dp_rank[dev] = d;
        p.tp_rank[dev] = t;
      }
    }
  }
  return p;
}

}  // namespace

absl::StatusOr<RunOutput> SimulatePlan(const Plan& plan, const ModelGraph& model, const Cluster& cluster,
                                       const TrainSettings& train, DeviceModel& device_model, Collective& collective,
                                       Scheduler& scheduler, const SimSettings& settings, bool with_tables) {
  TESTBED_RETURN_IF_ERROR(plan.Validate(static_cast<int>(model.layers.size()), cluster));
  const auto t0 = std::chrono::steady_clock::now();
  SchedulingContext sctx{model, cluster, plan, train, device_model, settings.compression};
  absl::StatusOr<Schedule> schedule = CallPlugin("scheduler", "", [&] { return scheduler.BuildSchedule(sctx); });
  if (!schedule.ok()) return schedule.status();
  if (settings.check_schedule) TESTBED_RETURN_IF_ERROR(schedule->Check());
  const auto t1 = std::chrono::steady_clock::now();

  SimOptions opt;
  opt.free_communication = settings.free_communication;
  opt.record_timeline = with_tables && (settings.timeline == "on" ||
                                        (settings.timeline == "auto" &&
                                         static_cast<std::int64_t>(schedule->size()) <= settings.timeline_max_tasks));
  SimInputs in{model, cluster, plan, train, device_model, collective};
  TESTBED_ASSIGN_OR_RETURN(SimResult r, Simulate(*schedule, in, opt));
  const auto t2 = std::chrono::steady_clock::now();

  const Placement place = PlaceDevices(plan, cluster.num_devices());
  std::vector<DeviceId> used;
  for (int d = 0; d < plan.dp; ++d) {
    for (int s = 0; s < plan.pp; ++s) {
      for (int t = 0; t < plan.tp; ++t) used.push_back(plan.DeviceOf(d, s, t));
    }
  }
  std::sort(used.begin(), used.end());

  // Memory: refuse a plan whose peak exceeds a device's memory, naming the device.
  double peak = 0, capacity = std::numeric_limits<double>::infinity();
  DeviceId worst = -1;
  double worst_short = 0;
  for (DeviceId d : used) {
    const SimDeviceStats& st = r.devices[static_cast<size_t>(d)];
    const double need = st.memory_peak_bytes + settings.memory_reserve_bytes;
    const double have = static_cast<double>(cluster.spec_of(d).memory_bytes);
    peak = std::max(peak, need);
    capacity = std::min(capacity, have);
    if (need - have > worst_short) {
      worst_short = need - have;
      worst = d;
    }
  }
  if (settings.enforce_memory && worst >= 0) {
    const SimDeviceStats& st = r.devices[static_cast<size_t>(worst)];
    const size_t w = static_cast<size_t>(worst);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "plan does not fit in memory: device %d (%s, stage %d, data-parallel rank %d, tensor rank %d) needs "
        "%.2f GiB (%.2f GiB weights, gradients and optimizer state, the rest activations%s) of its %.2f GiB: "
        "short by %.2f GiB",
        worst, cluster.spec_of(worst).name, place.stage[w], place.dp_rank[w], place.tp_rank[w],
        (st.memory_peak_bytes + settings.memory_reserve_bytes) / kGiB, st.static_bytes / kGiB,
        settings.memory_reserve_bytes > 0 ? absl::StrFormat(" and %.2f GiB reserved", settings.memory_reserve_bytes / kGiB) : "",
        static_cast<double>(cluster.spec_of(worst).memory_bytes) / kGiB, worst_short / kGiB));
  }

  const double T = r.iteration_time_s;
  const double samples = static_cast<double>(plan.dp) * static_cast<double>(plan.micro_batches) *
                         static_cast<double>(plan.micro_batch);
  const double model_flops = model.TrainFlopsPerSample() * samples;
  double peak_flops = 0, idle = 0, exposed_max = 0, exposed_sum = 0, compute_max = 0;
  for (DeviceId d : used) {
    const SimDeviceStats& st = r.devices[static_cast<size_t>(d)];
    peak_flops += cluster.spec_of(d).PeakFlops(train.precision);
    idle += st.idle_s;
    exposed_max = std::max(exposed_max, st.exposed_comm_s);
    exposed_sum += st.exposed_comm_s;
    compute_max = std::max(compute_max, st.compute_s);
  }
  const double n_used = static_cast<double>(used.size());
  // Pipeline start-up: until the last stage starts its first forward (AutoPipe's measure).
  double startup = 0;
  bool seen_last = false;
  for (TaskId t = 0; t < static_cast<TaskId>(schedule->size()); ++t) {
    const Task& task = schedule->task(t);
    if (task.kind != TaskKind::kCompute || task.stage != plan.pp - 1 || task.phase != Phase::kForward) continue;
    const double st = r.task_start_s[static_cast<size_t>(t)];
    startup = seen_last ? std::min(startup, st) : st;
    seen_last = true;
  }
  RunOutput out;
  MetricSet& m = out.metrics;
  m.Add("iteration_time_s", T, "s", Better::kLower);
  m.Add("throughput_samples_per_s", T > 0 ? samples / T : 0, "samples/s", Better::kHigher);
  m.Add("throughput_tokens_per_s", T > 0 ? samples * static_cast<double>(model.shape.seq_len) / T : 0, "tokens/s",
        Better::kHigher);
  m.Add("model_flops_per_iteration", model_flops, "FLOP");
  m.Add("achieved_tflops_per_device", T > 0 ? model_flops / T / n_used / 1e12 : 0, "TFLOP/s", Better::kHigher);
  m.Add("mfu", T > 0 && peak_flops > 0 ? model_flops / T / peak_flops : 0, "1", Better::kHigher);
  m.Add("bubble_fraction", T > 0 ? idle / n_used / T : 0, "1", Better::kLower);
  m.Add("pipeline_startup_s", startup, "s", Better::kLower);
  m.Add("exposed_comm_s", exposed_max, "s", Better::kLower);
  m.Add("exposed_comm_mean_s", exposed_sum / n_used, "s", Better::kLower);
  m.Add("compute_time_max_s", compute_max, "s", Better::kLower);
  m.Add("memory_peak_bytes", peak, "B", Better::kLower);
  m.Add("memory_peak_gib", peak / kGiB, "GiB", Better::kLower);
  m.Add("memory_capacity_gib", capacity / kGiB, "GiB");
  m.Add("tp", plan.tp, "devices");
  m.Add("pp", plan.pp, "stages");
  m.Add("dp", plan.dp, "replicas");
  m.Add("virtual_stages", plan.virtual_stages, "chunks");
  m.Add("micro_batch", static_cast<double>(plan.micro_batch), "samples");
  m.Add("micro_batches", static_cast<double>(plan.micro_batches), "micro-batches");
  m.Add("devices", n_used, "devices");
  m.Add("tasks", static_cast<double>(r.tasks), "tasks");
  m.Add("schedule_build_s", std::chrono::duration<double>(t1 - t0).count(), "s");
  m.Add("simulation_wall_s", std::chrono::duration<double>(t2 - t1).count(), "s");
  if (!with_tables) return out;

  Table dev;
  dev.name = "per_device";
  std::vector<std::int64_t> ids, nodes, stage, dpr, tpr, held;
  std::vector<double> compute, comm, exposed, idle_v, mem, stat;
  for (DeviceId d : used) {
    const size_t i = static_cast<size_t>(d);
    const SimDeviceStats& st = r.devices[i];
    ids.push_back(d);
    nodes.push_back(cluster.device(d).node);
    stage.push_back(place.stage[i]);
    dpr.push_back(place.dp_rank[i]);
    tpr.push_back(place.tp_rank[i]);
    compute.push_back(st.compute_s);
    comm.push_back(st.comm_s);
    exposed.push_back(st.exposed_comm_s);
    idle_v.push_back(st.idle_s);
    mem.push_back(st.memory_peak_bytes);
    stat.push_back(st.static_bytes);
    held.push_back(st.max_micro_batches_held);
  }
  dev.columns = {{"device", "", ids},       {"node", "", nodes},         {"stage", "", stage},
                 {"dp_rank", "", dpr},      {"tp_rank", "", tpr},         {"compute_s", "s", compute},
                 {"comm_s", "s", comm},     {"exposed_comm_s", "s", exposed}, {"idle_s", "s", idle_v},
                 {"memory_peak_bytes", "B", mem}, {"static_bytes", "B", stat},
                 {"micro_batches_held", "micro-batches", held}};
  out.tables.push_back(std::move(dev));

  Table links;
  links.name = "per_link";
  std::vector<std::string> lname, lkind;
  std::vector<double> lbw, lbytes, lbusy, lutil;
  for (const Link& l : cluster.links()) {
    const SimLinkStats& st = r.links[static_cast<size_t>(l.id)];
    if (st.bytes <= 0) continue;
    lname.push_back(l.name);
    lkind.emplace_back(LinkKindName(l.spec.kind));
    lbw.push_back(l.spec.bandwidth_bytes_per_s);
    lbytes.push_back(st.bytes);
    lbusy.push_back(st.busy_s);
    lutil.push_back(T > 0 ? st.busy_s / T : 0);
  }
  links.columns = {{"link", "", lname},          {"kind", "", lkind},       {"bandwidth", "B/s", lbw},
                   {"bytes", "B", lbytes},      {"busy_s", "s", lbusy},    {"busy_fraction", "1", lutil}};
  out.tables.push_back(std::move(links));

  if (opt.record_timeline) {
    Table tl;
    tl.name = "timeline";
    std::vector<std::int64_t> task, device, stream;
    std::vector<double> start, end;
    std::vector<std::string> kind, label, stream_name;
    for (const TimelineEvent& e : r.timeline) {
      task.push_back(e.task);
      device.push_back(e.device);
      stream.push_back(e.stream);
      stream_name.emplace_back(StreamName(e.stream));
      start.push_back(e.start_s);
      end.push_back(e.end_s);
      kind.emplace_back(KindLabel(schedule->task(e.task).kind));
      label.push_back(schedule->Describe(e.task));
    }
    tl.columns = {{"task", "", task},   {"device", "", device}, {"stream", "", stream},
                  {"stream_name", "", stream_name}, {"start_s", "s", start}, {"end_s", "s", end},
                  {"kind", "", kind},   {"label", "", label}};
    out.tables.push_back(std::move(tl));
  } else {
    out.notes.push_back(absl::StrCat("timeline not recorded (", schedule->size(),
                                     " tasks; set [experiment] timeline = \"on\" to keep it)"));
  }
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
