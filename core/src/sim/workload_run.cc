#include "sim/workload_run.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "chakra/astra_text.h"
#include "chakra/et_io.h"
#include "memory_budget.h"
#include "testbed/kept_blocks.h"
#include "sim/sim_report.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;

// A path of [workload] relative to the experiment file's directory, else to the working
// directory; `exists` says whether a candidate is there.
absl::StatusOr<std::string> Locate(const ResolvedRun& run, const std::string& key, const std::string& value,
                                   bool (*exists)(const fs::path&)) {
  const fs::path given(value);
  std::vector<fs::path> candidates;
  if (given.is_absolute()) {
    candidates.push_back(given);
  } else {
    const fs::path file(run.spec.doc.Where({"workload", key}).file);
    if (file.has_parent_path()) candidates.push_back(file.parent_path() / given);
    candidates.push_back(given);
  }
  for (const fs::path& c : candidates) {
    if (exists(c)) return c.string();
  }
  std::string tried;
  for (const fs::path& c : candidates) absl::StrAppend(&tried, tried.empty() ? "" : ", ", c.string());
  return absl::NotFoundError(absl::StrCat(run.spec.doc.Where({"workload", key}).ToString(), ": [workload] ", key, " = \"",
                                          value, "\": not found (looked for ", tried, ")"));
}

bool TracesExist(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) || fs::exists(fs::path(p.string() + ".0.et"), ec);
}
bool FileExists(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

const std::vector<ParamSpec>& WorkloadSchema() {
  static const std::vector<ParamSpec> specs = {
      ParamSpec::String("chakra", "").Doc("Chakra execution traces to simulate instead of a model: a prefix of "
                                          "<prefix>.<rank>.et files (and <prefix>.comm_groups.json), or their directory"),
      ParamSpec::String("astra_text", "").Doc("an ASTRA-sim text workload (DATA, MODEL, HYBRID_*, MICRO) to simulate "
                                              "instead of a model"),
      ParamSpec::Int("ranks", 0).Range(0, 100000000).Unit("ranks")
          .Doc("astra_text: the NPUs it runs on (0: every device of the cluster)"),
      ParamSpec::Int("passes", 1).Range(1, 1000000).Unit("iterations").Doc("astra_text: training iterations"),
      ParamSpec::Double("cycle_ns", 1.0).Min(0).Unit("ns").Doc("astra_text: one cycle of its compute times"),
      ParamSpec::Int("model_parallel", 0).Range(0, 100000000).Unit("ranks")
          .Doc("astra_text hybrids: model-parallel group size (0: the file's model_parallel_NPU_group, else all ranks)"),
      ParamSpec::Int("samples", 1).Range(1, 1LL << 40).Unit("samples")
          .Doc("samples one iteration of the traces trains (for throughput; traces do not say)"),
  };
  return specs;
}

const std::vector<std::string>& WorkloadKeys() {
  static const std::vector<std::string> keys = {"chakra", "astra_text"};
  return keys;
}

absl::StatusOr<chakra::ImportedWorkload> LoadWorkload(const ResolvedRun& run) {
  ParamReader read(run.sections.at("workload"), "[workload]");
  const std::string traces = read.Get<std::string>("chakra");
  const std::string text = read.Get<std::string>("astra_text");
  chakra::TextWorkloadOptions topt;
  topt.ranks = static_cast<int>(read.Get<std::int64_t>("ranks"));
  topt.passes = static_cast<int>(read.Get<std::int64_t>("passes"));
  topt.cycle_s = read.Get<double>("cycle_ns") * 1e-9;
  topt.model_parallel = static_cast<int>(read.Get<std::int64_t>("model_parallel"));
  TESTBED_RETURN_IF_ERROR(read.status());
  if (!traces.empty() && !text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(run.spec.doc.Where({"workload"}).ToString(),
                                                   ": [workload] takes chakra or astra_text, not both"));
  }
  chakra::TraceSet set;
  std::string source;
  if (!traces.empty()) {
    TESTBED_ASSIGN_OR_RETURN(source, Locate(run, "chakra", traces, TracesExist));
    TESTBED_ASSIGN_OR_RETURN(set, chakra::ReadTraceSet(source));
  } else {
    TESTBED_ASSIGN_OR_RETURN(source, Locate(run, "astra_text", text, FileExists));
    if (topt.ranks == 0) topt.ranks = run.cluster->num_devices();
    TESTBED_ASSIGN_OR_RETURN(set, chakra::ConvertTextWorkload(source, topt));
  }
  if (static_cast<int>(set.ranks.size()) > run.cluster->num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the workload has ", set.ranks.size(), " ranks but cluster '",
                                                   run.cluster->name(), "' has ", run.cluster->num_devices(), " devices"));
  }
  chakra::ImportOptions iopt;
  iopt.precision = run.train.precision;
  return chakra::ImportTraceSet(set, source, iopt);
}

absl::StatusOr<RunOutput> SimulateWorkload(const ResolvedRun& run, SimRun& p) {
  // Blocks kept from earlier work go back to the kernel first: what this run adds is
  // measured from memory in use only.
  ReleaseKeptBlocks();
  const double resident_before = ResidentMiB();
  const auto t0 = std::chrono::steady_clock::now();
  TESTBED_ASSIGN_OR_RETURN(chakra::ImportedWorkload w, LoadWorkload(run));
  const Schedule& schedule = w.schedule;
  if (p.settings.check_schedule) TESTBED_RETURN_IF_ERROR(schedule.Check());
  const auto t1 = std::chrono::steady_clock::now();

  static const ModelGraph kNoModel;
  SimOptions opt;
  opt.free_communication = p.settings.free_communication;
  opt.rate_updates = p.settings.rate_updates;
  opt.cancelled = p.settings.cancelled;
  opt.record_timeline = p.settings.timeline == "on" ||
                        (p.settings.timeline == "auto" &&
                         static_cast<std::int64_t>(schedule.size()) <= p.settings.timeline_max_tasks);
  SimInputs in{kNoModel, *run.cluster, *p.device_model, *p.collective};
  TESTBED_ASSIGN_OR_RETURN(SimResult r, Simulate(schedule, in, opt));
  const auto t2 = std::chrono::steady_clock::now();
  // Blocks kept for reuse (the engine's records, given back as it ended) are held, not used.
  const double resident_growth =
      std::max(0.0, ResidentMiB() - static_cast<double>(KeptBlockBytes()) / 1048576.0 - resident_before);

  // Rank r on device r, each its own replica of one stage: the report's placement.
  Plan plan;
  Stage& stage = plan.stages.emplace_back();
  stage.chunks = {StageSpec{}};
  for (int d = 0; d < schedule.num_devices(); ++d) stage.replicas.push_back(StageReplica{{d}, 1, 0});
  ParamReader read(run.sections.at("workload"), "[workload]");
  plan.micro_batch = read.Get<std::int64_t>("samples");
  TESTBED_RETURN_IF_ERROR(read.status());
  if (p.settings.enforce_memory) TESTBED_RETURN_IF_ERROR(CheckMemory(plan, *run.cluster, r, p.settings.memory_reserve_bytes));

  const ReportInputs report{plan, kNoModel, *run.cluster, run.train, schedule, r, p.settings.memory_reserve_bytes};
  RunOutput out;
  // Everything but what needs a model's FLOPs or a plan's degrees.
  static const std::set<std::string> kNeedModel = {"throughput_tokens_per_s", "model_flops_per_iteration",
                                                   "achieved_tflops_per_device", "mfu", "pipeline_startup_s", "tp", "pp",
                                                   "dp", "virtual_stages", "micro_batch", "micro_batches",
                                                   "heterogeneous_plan"};
  const MetricSet all = SimMetrics(report);
  for (const Metric& m : all.all()) {
    if (!kNeedModel.count(m.name)) out.metrics.Add(m.name, m.value, m.unit, m.better);
  }
  out.metrics.Add("workload_ranks", schedule.num_devices(), "ranks");
  out.metrics.Add("workload_nodes", static_cast<double>(w.nodes), "nodes");
  out.metrics.Add("workload_warnings", static_cast<double>(w.warnings.size()), "kinds");
  out.metrics.Add("schedule_build_s", std::chrono::duration<double>(t1 - t0).count(), "s");
  out.metrics.Add("simulation_wall_s", std::chrono::duration<double>(t2 - t1).count(), "s");
  out.metrics.Add("simulator_memory_mib", resident_growth, "MiB");
  out.metrics.Add("process_peak_memory_mib", PeakResidentMiB(), "MiB");
  SimTables(report, opt.record_timeline, out);
  for (const std::string& line : w.warnings) {
    std::fprintf(stderr, "warning: %s\n", line.c_str());
    out.notes.push_back(absl::StrCat("import: ", line));
  }
  return out;
}

}  // namespace testbed
