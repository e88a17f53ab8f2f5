// FeatureLoader::Refine (testbed/feature_loader.h): the planning chain's step shared by every
// feature loader. Samples each data-parallel replica's mini-batches, runs the loader over
// them (checking every answer), and turns the answers into the run's host-to-device copies,
// the sampled batches' work per graph layer and the loader's metrics.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/batch_stream.h"
#include "graph/graph_source.h"
#include "graph/load_checker.h"
#include "testbed/feature_loader.h"
#include "testbed/status_macros.h"
#include "testbed/train/neighbor_sampler.h"
#include "testbed/train/parallel_sampler.h"

namespace testbed {

std::vector<ParamSpec> FeatureLoaderParams() {
  return {
      ParamSpec::String("graph", "rmat")
          .Doc("the training graph: rmat (generated from vertices, edges, graph_seed), cora or citeseer (shipped, "
               "their training split), or an edge-list file (src,dst lines, plain or .gz)"),
      ParamSpec::Int("vertices", 1 << 16).Range(0, 1LL << 34).Unit("vertices")
          .Doc("rmat: vertices; edge list: ids lie below it (0: one more than the largest id)"),
      ParamSpec::Int("edges", 1 << 20).Range(0, 1LL << 36).Unit("edges")
          .Doc("rmat: edges drawn (duplicates and self-loops dropped, so the graph has at most this many)"),
      ParamSpec::Int("graph_seed", 1).Range(0, 1LL << 62).Doc("rmat: the generator's seed; generated and edge-list "
                                                               "graphs: the draw of the training vertices"),
      ParamSpec::Double("train_fraction", 0.66).Range(1e-9, 1).Unit("1")
          .Doc("generated and edge-list graphs: the share of vertices that are training seeds"),
      ParamSpec::Int("threads", 1).Range(1, 256).Unit("threads").Doc("CPU threads for sampling and the loader"),
  };
}

absl::StatusOr<GraphSource> GraphSourceFrom(const ParamSet& params, const std::string& owner) {
  ParamReader read(params, owner);
  GraphSource s;
  s.graph = read.Get<std::string>("graph");
  s.vertices = read.Get<std::int64_t>("vertices");
  s.edges = read.Get<std::int64_t>("edges");
  s.graph_seed = static_cast<std::uint64_t>(read.Get<std::int64_t>("graph_seed"));
  s.train_fraction = read.Get<double>("train_fraction");
  s.threads = static_cast<int>(read.Get<std::int64_t>("threads"));
  TESTBED_RETURN_IF_ERROR(read.status());
  if (s.graph.empty()) return absl::InvalidArgumentError(absl::StrCat(owner, ".graph: empty; name a graph"));
  return s;
}

namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Totals {
  double copied_rows = 0, input_rows = 0, setup_rows = 0, detect_s = 0, sampled_edges = 0, calls = 0;
  std::int64_t resident_peak = 0, device_rows_peak = 0;
};

}  // namespace

absl::Status FeatureLoader::Refine(RefineContext& ctx) {
  const ModelGraph& model = ctx.planning.model;
  const std::string owner = "feature_loader";
  if (model.shape.family != "gnn") {
    return absl::InvalidArgumentError(absl::StrCat("a feature loader needs a model of family \"gnn\"; model '",
                                                   model.shape.name, "' is of family \"", model.shape.family, "\""));
  }
  Plan& plan = ctx.plan;
  const auto t0 = std::chrono::steady_clock::now();
  TESTBED_ASSIGN_OR_RETURN(SourceGraph g, LoadSourceGraph(source_, owner));
  std::vector<std::int64_t> degrees(static_cast<size_t>(g.graph.vertices));
  for (std::int64_t v = 0; v < g.graph.vertices; ++v) degrees[static_cast<size_t>(v)] = g.graph.Degree(v);
  FeatureGraph fg;
  fg.vertices = g.graph.vertices;
  fg.degrees = degrees;
  fg.row_bytes = 4 * model.shape.inputs;  // fp32 features
  fg.threads = source_.threads;
  std::vector<int> fanouts;
  for (std::int64_t f : model.shape.fanouts) fanouts.push_back(static_cast<int>(f));
  const int hops = static_cast<int>(fanouts.size());
  const int dp = plan.dp(0);
  const std::int64_t steps = std::max<std::int64_t>(1, ctx.planning.train.steps);
  BatchStream stream(g, fanouts, plan.micro_batch, ctx.planning.seed, source_.threads);
  const double sampling_s = Since(t0);

  Totals tot;
  // Per iteration and layer: the sampled batches' targets in seeds' worth of the model's
  // per-seed tree (Layer::gnn_targets_per_sample), summed over replicas and micro-batches.
  std::vector<std::vector<double>> layer_work(static_cast<size_t>(steps), std::vector<double>(static_cast<size_t>(hops)));
  std::vector<double> micro_batches_of(static_cast<size_t>(steps));
  // Per iteration over every replica: rows copied to the devices, and rows the batches read.
  std::vector<double> copied_of(static_cast<size_t>(steps)), read_of(static_cast<size_t>(steps));
  for (int r = 0; r < dp; ++r) {
    const std::int64_t mbs = plan.MicroBatches(0, r);
    LoadChecker checker(g.graph.vertices);
    // Rows held beyond the batch's own (those the first layer's activations already count),
    // at their most: after Begin, and beside each batch.
    std::int64_t replica_rows_peak = 0, replica_extra_peak = 0;
    absl::StatusOr<FeatureLoad> begun = Begin(fg);
    if (!begun.ok()) return begun.status();
    TESTBED_RETURN_IF_ERROR(checker.Apply(*begun, {}, owner, absl::StrCat("Begin on replica ", r)));
    replica_extra_peak = checker.resident_rows();
    tot.setup_rows = std::max(tot.setup_rows, static_cast<double>(begun->copied.size()));
    tot.resident_peak = std::max(tot.resident_peak, checker.resident_rows());
    // Begin's copies (a static cache's fill) happen once before training, not in every
    // epoch: they are reported (feature_setup_copy_bytes) and left out of the iterations.
    for (std::int64_t it = 0; it < steps; ++it) {
      std::vector<std::int64_t> globals;
      for (std::int64_t m = 0; m < mbs; ++m) globals.push_back(BatchStream::Global(it, m, mbs, dp, r));
      TESTBED_ASSIGN_OR_RETURN(std::vector<train::SampledBatch> batches, stream.Sample(globals));
      StepInput& step = ctx.inputs.Mutable(static_cast<int>(it));
      for (std::int64_t m = 0; m < mbs; ++m) {
        const train::SampledBatch& b = batches[static_cast<size_t>(m)];
        const std::vector<std::int64_t>& rows = b.hops.back();  // every vertex whose features the batch reads
        absl::StatusOr<FeatureLoad> load = Next(rows);
        if (!load.ok()) return load.status();
        TESTBED_RETURN_IF_ERROR(checker.Apply(*load, rows, owner,
                                              absl::StrCat("Next on replica ", r, ", iteration ", it, ", micro-batch ", m)));
        tot.copied_rows += static_cast<double>(load->copied.size());
        tot.input_rows += static_cast<double>(rows.size());
        copied_of[static_cast<size_t>(it)] += static_cast<double>(load->copied.size());
        read_of[static_cast<size_t>(it)] += static_cast<double>(rows.size());
        tot.detect_s += load->detect_s;
        tot.sampled_edges += static_cast<double>(b.SampledEdges());
        tot.calls += 1;
        tot.resident_peak = std::max(tot.resident_peak, checker.resident_rows());
        replica_rows_peak = std::max(replica_rows_peak, checker.device_rows());
        replica_extra_peak = std::max(replica_extra_peak, checker.device_rows() - static_cast<std::int64_t>(rows.size()));
        step.copies.push_back(HostTransfer{0, r, static_cast<int>(m),
                                           static_cast<std::int64_t>(load->copied.size()) * fg.row_bytes, true, -1});
        for (int i = 0; i < hops; ++i) {
          const Layer& l = model.layers[static_cast<size_t>(i)];
          const auto targets = static_cast<double>(b.hops[static_cast<size_t>(hops - 1 - i)].size());
          layer_work[static_cast<size_t>(it)][static_cast<size_t>(i)] += targets / l.gnn_targets_per_sample;
        }
      }
      micro_batches_of[static_cast<size_t>(it)] += static_cast<double>(mbs);
    }
    // The replica's feature buffer stays allocated on each of its devices: the rows beyond
    // the batch at their most (the batch's rows are the first layer's input activations).
    replica_rows_peak = std::max(replica_rows_peak, checker.resident_rows());
    tot.device_rows_peak = std::max(tot.device_rows_peak, replica_rows_peak);
    plan.stages[0].replicas[static_cast<size_t>(r)].resident_bytes =
        static_cast<double>(replica_extra_peak) * static_cast<double>(fg.row_bytes);
  }
  // One epoch: every training vertex once, micro_batches x micro_batch seeds per replica and
  // iteration over the replicas.
  {
    std::int64_t per_iteration = 0;
    for (int r = 0; r < dp; ++r) per_iteration += plan.MicroBatches(0, r) * plan.micro_batch;
    const auto seeds = static_cast<std::int64_t>(g.seeds.size());
    plan.iterations_per_epoch = std::max<std::int64_t>(1, (seeds + per_iteration - 1) / std::max<std::int64_t>(1, per_iteration));
  }
  for (std::int64_t it = 0; it < steps; ++it) {
    StepInput& step = ctx.inputs.Mutable(static_cast<int>(it));
    for (int i = 0; i < hops; ++i) {
      const double mean = layer_work[static_cast<size_t>(it)][static_cast<size_t>(i)] /
                          std::max(1.0, micro_batches_of[static_cast<size_t>(it)]);
      step.layer_samples[i] = std::max<std::int64_t>(1, std::llround(mean));
    }
  }
  const double per_step = static_cast<double>(dp) * static_cast<double>(steps);
  const double row = static_cast<double>(fg.row_bytes);
  MetricSet& m = plan.planner_metrics;
  m.Add("graph_vertices", static_cast<double>(g.graph.vertices), "vertices");
  m.Add("graph_edges", static_cast<double>(g.graph.edges()), "edges");
  m.Add("graph_generated", g.generated ? 1 : 0, "1");
  m.Add("feature_row_bytes", row, "B");
  m.Add("feature_copy_bytes_per_step", tot.copied_rows * row / per_step, "B", Better::kLower);
  m.Add("feature_setup_copy_bytes", tot.setup_rows * row, "B", Better::kLower);
  m.Add("feature_input_rows_per_step", tot.input_rows / per_step, "rows");
  m.Add("feature_copy_fraction", tot.input_rows > 0 ? tot.copied_rows / tot.input_rows : 0, "1", Better::kLower);
  m.Add("feature_rows_resident_peak", static_cast<double>(tot.resident_peak), "rows");
  m.Add("feature_device_bytes_peak", static_cast<double>(tot.device_rows_peak) * row, "B", Better::kLower);
  m.Add("feature_device_mib_peak", static_cast<double>(tot.device_rows_peak) * row / 1048576.0, "MiB", Better::kLower);
  m.Add("iterations_per_epoch", static_cast<double>(plan.iterations_per_epoch), "iterations");
  m.Add("duplicate_detection_s_per_step", tot.detect_s / per_step, "s", Better::kLower);
  m.Add("sampled_edges_per_step", tot.sampled_edges / per_step, "edges");
  m.Add("graph_build_s", sampling_s, "s");
  Table t;
  t.name = "feature_steps";
  std::vector<std::int64_t> iteration;
  std::vector<double> copy_bytes, read_bytes;
  for (std::int64_t it = 0; it < steps; ++it) {
    iteration.push_back(it);
    copy_bytes.push_back(copied_of[static_cast<size_t>(it)] * row);
    read_bytes.push_back(read_of[static_cast<size_t>(it)] * row);
  }
  t.columns = {{"iteration", "", iteration}, {"copy_bytes", "B", copy_bytes}, {"input_bytes", "B", read_bytes}};
  plan.planner_tables.push_back(std::move(t));
  return absl::OkStatus();
}

}  // namespace testbed
