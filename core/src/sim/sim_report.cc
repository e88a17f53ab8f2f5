#include "sim/sim_report.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace testbed {
namespace {
constexpr double kGiB = 1073741824.0;
}  // namespace

Placement PlaceDevices(const Plan& plan, int devices) {
  Placement p;
  p.stage.assign(static_cast<size_t>(devices), -1);
  p.dp_rank.assign(static_cast<size_t>(devices), -1);
  p.tp_rank.assign(static_cast<size_t>(devices), -1);
  for (int s = 0; s < plan.pp(); ++s) {
    for (int d = 0; d < plan.dp(s); ++d) {
      for (int t = 0; t < plan.tp(s); ++t) {
        const size_t dev = static_cast<size_t>(plan.DeviceOf(d, s, t));
        p.stage[dev] = s;
        p.dp_rank[dev] = d;
        p.tp_rank[dev] = t;
      }
    }
  }
  return p;
}

absl::Status CheckMemory(const Plan& plan, const Cluster& cluster, const SimResult& r, double reserve) {
  DeviceId worst = -1;
  double worst_short = 0;
  for (DeviceId d : plan.Devices()) {
    const double need = r.devices[static_cast<size_t>(d)].memory_peak_bytes + reserve;
    const double have = static_cast<double>(cluster.spec_of(d).memory_bytes);
    if (need - have > worst_short) {
      worst_short = need - have;
      worst = d;
    }
  }
  if (worst < 0) return absl::OkStatus();
  const Placement place = PlaceDevices(plan, cluster.num_devices());
  const SimDeviceStats& st = r.devices[static_cast<size_t>(worst)];
  const size_t w = static_cast<size_t>(worst);
  return absl::ResourceExhaustedError(absl::StrFormat(
      "plan does not fit in memory: device %d (%s, stage %d, data-parallel rank %d, tensor rank %d) needs "
      "%.2f GiB (%.2f GiB weights, gradients and optimizer state, the rest activations%s) of its %.2f GiB: "
      "short by %.2f GiB",
      worst, cluster.spec_of(worst).name, place.stage[w], place.dp_rank[w], place.tp_rank[w],
      (st.memory_peak_bytes + reserve) / kGiB, st.static_bytes / kGiB,
      reserve > 0 ? absl::StrFormat(" and %.2f GiB reserved", reserve / kGiB) : "",
      static_cast<double>(cluster.spec_of(worst).memory_bytes) / kGiB, worst_short / kGiB));
}

namespace {

// Host-device copies (StepInput::copies), where a run has any: per iteration, the busiest
// device's time in copies (start to end, so waiting for a shared PCIe link counts) and bytes.
void AddHostCopyMetrics(const ReportInputs& in, double steps, MetricSet& m) {
  std::map<DeviceId, std::pair<double, double>> per_device;  // seconds, bytes
  for (TaskId t = 0; t < static_cast<TaskId>(in.schedule.size()); ++t) {
    const Task& task = in.schedule.task(t);
    if (task.kind != TaskKind::kCopy) continue;
    auto& [seconds, bytes] = per_device[task.device];
    seconds += in.result.task_end_s[static_cast<size_t>(t)] - in.result.task_start_s[static_cast<size_t>(t)];
    bytes += static_cast<double>(task.bytes);
  }
  if (per_device.empty()) return;
  double seconds_max = 0, bytes_max = 0;
  for (const auto& [device, sb] : per_device) {
    seconds_max = std::max(seconds_max, sb.first);
    bytes_max = std::max(bytes_max, sb.second);
  }
  m.Add("host_copy_time_s", seconds_max / steps, "s", Better::kLower);
  m.Add("host_copy_bytes", bytes_max / steps, "B", Better::kLower);
}

// MoE layers under expert parallelism: per iteration, layer, micro-batch and expert-parallel
// group, the time of its all-to-alls (start to end) plus its busiest rank's expert compute,
// forward and backward (the sum of the parts, overlap not credited: what a load balancer's
// cost model predicts), averaged.
void AddMoeMetrics(const ReportInputs& in, MetricSet& m) {
  const int ep = in.plan.experts.degree;
  if (ep < 2) return;
  using Key = std::tuple<int, int, int, int>;  // iteration, layer, micro-batch, group
  std::map<Key, double> layer_time;
  std::map<std::tuple<Key, int, DeviceId>, double> expert_time;  // + phase, device: summed over steps
  for (TaskId t = 0; t < static_cast<TaskId>(in.schedule.size()); ++t) {
    const Task& task = in.schedule.task(t);
    const double took = in.result.task_end_s[static_cast<size_t>(t)] - in.result.task_start_s[static_cast<size_t>(t)];
    const Key key{task.iteration, task.first_layer, task.micro_batch, task.replica / ep};
    if (task.kind == TaskKind::kCollective && task.op == CollectiveOp::kAllToAllV &&
        in.model.layers[static_cast<size_t>(task.first_layer)].kind == LayerKind::kMoe) {
      layer_time[key] += took;
    } else if (task.kind == TaskKind::kCompute && task.work >= 0 && in.schedule.compute(t).part == LayerPart::kMoeExperts) {
      expert_time[{key, static_cast<int>(task.phase), task.device}] += took;
    }
  }
  if (layer_time.empty()) return;
  std::map<std::pair<Key, int>, double> busiest;
  for (const auto& [k, s] : expert_time) {
    double& b = busiest[{std::get<0>(k), std::get<1>(k)}];
    b = std::max(b, s);
  }
  for (const auto& [k, s] : busiest) layer_time[k.first] += s;
  double sum = 0;
  for (const auto& [k, s] : layer_time) sum += s;
  m.Add("moe_layer_time_s", sum / static_cast<double>(layer_time.size()), "s", Better::kLower);
}

}  // namespace

MetricSet SimMetrics(const ReportInputs& in) {
  const Plan& plan = in.plan;
  const SimResult& r = in.result;
  const std::vector<DeviceId> used = plan.Devices();
  const double steps = std::max(1, in.schedule.iterations());
  // Per iteration: the whole schedule's time over the iterations it covers.
  const double total = r.iteration_time_s;
  const double T = total / steps;
  double peak = 0, capacity = std::numeric_limits<double>::infinity();
  for (DeviceId d : used) {
    peak = std::max(peak, r.devices[static_cast<size_t>(d)].memory_peak_bytes + in.reserve_bytes);
    capacity = std::min(capacity, static_cast<double>(in.cluster.spec_of(d).memory_bytes));
  }
  const double samples = static_cast<double>(plan.SamplesPerIteration());
  const double model_flops = in.model.TrainFlopsPerSample() * samples;
  double peak_flops = 0, idle = 0, exposed_max = 0, exposed_sum = 0, compute_max = 0;
  for (DeviceId d : used) {
    const SimDeviceStats& st = r.devices[static_cast<size_t>(d)];
    peak_flops += in.cluster.spec_of(d).PeakFlops(in.train.precision);
    idle += st.idle_s;
    exposed_max = std::max(exposed_max, st.exposed_comm_s);
    exposed_sum += st.exposed_comm_s;
    compute_max = std::max(compute_max, st.compute_s);
  }
  const double n_used = static_cast<double>(used.size());
  // Pipeline start-up: until the last stage starts its first forward (AutoPipe's measure).
  double startup = 0;
  bool seen_last = false;
  for (TaskId t = 0; t < static_cast<TaskId>(in.schedule.size()); ++t) {
    const Task& task = in.schedule.task(t);
    if (task.kind != TaskKind::kCompute || task.stage != plan.pp() - 1 || task.phase != Phase::kForward) continue;
    const double st = r.task_start_s[static_cast<size_t>(t)];
    startup = seen_last ? std::min(startup, st) : st;
    seen_last = true;
  }
  MetricSet m;
  m.Add("iteration_time_s", T, "s", Better::kLower);
  if (plan.iterations_per_epoch > 0) {
    m.Add("epoch_time_s", T * static_cast<double>(plan.iterations_per_epoch), "s", Better::kLower);
  }
  m.Add("throughput_samples_per_s", T > 0 ? samples / T : 0, "samples/s", Better::kHigher);
  m.Add("throughput_tokens_per_s", T > 0 ? samples * static_cast<double>(in.model.shape.seq_len) / T : 0, "tokens/s",
        Better::kHigher);
  m.Add("model_flops_per_iteration", model_flops, "FLOP");
  m.Add("achieved_tflops_per_device", T > 0 ? model_flops / T / n_used / 1e12 : 0, "TFLOP/s", Better::kHigher);
  m.Add("mfu", T > 0 && peak_flops > 0 ? model_flops / T / peak_flops : 0, "1", Better::kHigher);
  // The attention scores' masked half not credited (the causal convention).
  m.Add("mfu_causal", T > 0 && peak_flops > 0 ? in.model.CausalTrainFlopsPerSample() * samples / T / peak_flops : 0,
        "1", Better::kHigher);
  m.Add("bubble_fraction", total > 0 ? idle / n_used / total : 0, "1", Better::kLower);
  m.Add("pipeline_startup_s", startup, "s", Better::kLower);
  m.Add("exposed_comm_s", exposed_max / steps, "s", Better::kLower);
  AddMoeMetrics(in, m);
  m.Add("exposed_comm_mean_s", exposed_sum / n_used / steps, "s", Better::kLower);
  m.Add("compute_time_max_s", compute_max / steps, "s", Better::kLower);
  m.Add("memory_peak_bytes", peak, "B", Better::kLower);
  m.Add("memory_peak_gib", peak / kGiB, "GiB", Better::kLower);
  m.Add("memory_capacity_gib", capacity / kGiB, "GiB");
  // Degrees: the grid's, or stage 0's for a heterogeneous plan (per_device has every device's).
  const auto grid = plan.Uniform();
  m.Add("tp", grid ? grid->tp : plan.tp(0), "devices");
  m.Add("pp", plan.pp(), "stages");
  // Data-parallel degree: replicas over the context-parallel degree.
  m.Add("dp", (grid ? grid->dp : plan.dp(0)) / plan.cp(), "replicas");
  if (plan.cp() > 1) m.Add("cp", plan.cp(), "ranks");
  m.Add("virtual_stages", plan.virtual_stages(), "chunks");
  m.Add("micro_batch", static_cast<double>(plan.micro_batch), "samples");
  m.Add("micro_batches", static_cast<double>(grid ? grid->micro_batches : plan.MicroBatches(0, 0)), "micro-batches");
  m.Add("heterogeneous_plan", grid ? 0.0 : 1.0, "1");
  m.Add("devices", n_used, "devices");
  m.Add("tasks", static_cast<double>(r.tasks), "tasks");
  if (steps > 1) {
    m.Add("steps", steps, "iterations");
    m.Add("total_time_s", total, "s", Better::kLower);
  }
  // Per link kind that carried bytes: the busy time of its busiest link per iteration, so
  // that a run shows which classes of links worked and how hard (the per_link table has
  // every link).
  std::map<LinkKind, double> busiest;
  for (const Link& l : in.cluster.links()) {
    const SimLinkStats& st = r.links[static_cast<size_t>(l.id)];
    if (st.bytes <= 0) continue;
    double& b = busiest[l.spec.kind];
    b = std::max(b, st.busy_s / steps);
  }
  for (const auto& [kind, busy] : busiest) m.Add(absl::StrCat("link_busy_", LinkKindName(kind), "_s"), busy, "s");
  AddHostCopyMetrics(in, steps, m);
  return m;
}

void SimTables(const ReportInputs& in, bool timeline, RunOutput& out) {
  const Plan& plan = in.plan;
  const SimResult& r = in.result;
  const Cluster& cluster = in.cluster;
  const Placement place = PlaceDevices(plan, cluster.num_devices());
  const double steps = std::max(1, in.schedule.iterations());
  const double T = r.iteration_time_s;
  Table dev;
  dev.name = "per_device";
  std::vector<std::int64_t> ids, nodes, stage, dpr, tpr, held;
  std::vector<double> compute, comm, exposed, idle_v, mem, stat;
  std::vector<std::string> type;
  for (DeviceId d : plan.Devices()) {
    const size_t i = static_cast<size_t>(d);
    const SimDeviceStats& st = r.devices[i];
    ids.push_back(d);
    nodes.push_back(cluster.device(d).node);
    type.push_back(cluster.spec_of(d).name);
    stage.push_back(place.stage[i]);
    dpr.push_back(place.dp_rank[i]);
    tpr.push_back(place.tp_rank[i]);
    compute.push_back(st.compute_s / steps);
    comm.push_back(st.comm_s / steps);
    exposed.push_back(st.exposed_comm_s / steps);
    idle_v.push_back(st.idle_s / steps);
    mem.push_back(st.memory_peak_bytes);
    stat.push_back(st.static_bytes);
    held.push_back(st.max_micro_batches_held);
  }
  dev.columns = {{"device", "", ids},       {"node", "", nodes},          {"device_type", "", type},
                 {"stage", "", stage},      {"dp_rank", "", dpr},         {"tp_rank", "", tpr},
                 {"compute_s", "s", compute}, {"comm_s", "s", comm},      {"exposed_comm_s", "s", exposed},
                 {"idle_s", "s", idle_v},   {"memory_peak_bytes", "B", mem}, {"static_bytes", "B", stat},
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
    lbytes.push_back(st.bytes / steps);
    lbusy.push_back(st.busy_s / steps);
    lutil.push_back(T > 0 ? st.busy_s / T : 0);
  }
  links.columns = {{"link", "", lname},     {"kind", "", lkind},    {"bandwidth", "B/s", lbw},
                   {"bytes", "B", lbytes}, {"busy_s", "s", lbusy}, {"busy_fraction", "1", lutil}};
  out.tables.push_back(std::move(links));

  if (r.iteration_end_s.size() > 1) {
    Table per_step;
    per_step.name = "per_step";
    std::vector<std::int64_t> step;
    std::vector<double> end, dur;
    double prev = 0;
    for (size_t i = 0; i < r.iteration_end_s.size(); ++i) {
      step.push_back(static_cast<std::int64_t>(i));
      end.push_back(r.iteration_end_s[i]);
      dur.push_back(r.iteration_end_s[i] - prev);
      prev = r.iteration_end_s[i];
    }
    per_step.columns = {{"step", "", step}, {"end_s", "s", end}, {"time_s", "s", dur}};
    out.tables.push_back(std::move(per_step));
  }

  if (timeline) {
    Table tl;
    tl.name = "timeline";
    std::vector<std::int64_t> task, device, stream;
    std::vector<double> start, end;
    std::vector<std::string> kind, label, stream_name;
    for (const TimelineEvent& e : r.timeline) {
      task.push_back(e.task);
      device.push_back(e.device);
      stream.push_back(e.stream);
      stream_name.emplace_back(streams::Name(e.stream));
      start.push_back(e.start_s);
      end.push_back(e.end_s);
      kind.emplace_back(TaskKindName(in.schedule.task(e.task).kind));
      label.push_back(in.schedule.Describe(e.task));
    }
    tl.columns = {{"task", "", task},   {"device", "", device}, {"stream", "", stream},
                  {"stream_name", "", stream_name}, {"start_s", "s", start}, {"end_s", "s", end},
                  {"kind", "", kind},   {"label", "", label}};
    out.tables.push_back(std::move(tl));
  } else {
    out.notes.push_back(absl::StrCat("timeline not recorded (", in.schedule.size(),
                                     " tasks; set [experiment] timeline = \"on\" to keep it)"));
  }
}

}  // namespace testbed
