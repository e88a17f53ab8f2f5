#include "exec/gnn_training.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exec/gnn_replica.h"
#include "exec/replica_sync.h"
#include "graph/batch_stream.h"
#include "graph/device_rows.h"
#include "graph/graph_source.h"
#include "memory_budget.h"
#include "testbed/communicator.h"
#include "testbed/feature_loader.h"
#include "testbed/param_set.h"
#include "testbed/status_macros.h"

namespace testbed::exec {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A generated graph's features and labels: each vertex's row drawn N(0, 1) from the graph's
// seed, its label the class whose random direction best matches the mean of its own and its
// neighbours' rows (so that a GNN can learn it and a per-vertex model only partly).
void GenerateFeatures(SourceGraph& g, std::int64_t inputs, std::int64_t classes, std::uint64_t seed) {
  train::Rng rng(seed ^ 0x9e3779b97f4a7c15ULL);
  g.features.resize(g.graph.vertices, inputs);
  for (Eigen::Index i = 0; i < g.features.size(); ++i) g.features.data()[i] = static_cast<float>(rng.Normal());
  train::Matrix<float> directions(inputs, classes);
  for (Eigen::Index i = 0; i < directions.size(); ++i) directions.data()[i] = static_cast<float>(rng.Normal());
  g.classes = classes;
  g.labels.assign(static_cast<size_t>(g.graph.vertices), 0);
  for (std::int64_t v = 0; v < g.graph.vertices; ++v) {
    Eigen::RowVectorXf mean = g.features.row(v);
    const train::Csr& adj = g.graph.adjacency;
    for (std::int64_t e = adj.offsets[static_cast<size_t>(v)]; e < adj.offsets[static_cast<size_t>(v) + 1]; ++e) {
      mean += g.features.row(adj.neighbors[static_cast<size_t>(e)]);
    }
    Eigen::Index best = 0;
    (mean * directions).maxCoeff(&best);
    g.labels[static_cast<size_t>(v)] = best;
  }
  // Held out: up to 1024 vertices that are not training seeds, the lowest ids.
  std::vector<std::uint8_t> is_seed(static_cast<size_t>(g.graph.vertices), 0);
  for (std::int64_t v : g.seeds) is_seed[static_cast<size_t>(v)] = 1;
  for (std::int64_t v = 0; v < g.graph.vertices && g.test.size() < 1024; ++v) {
    if (is_seed[static_cast<size_t>(v)] == 0) g.test.push_back(v);
  }
}

}  // namespace

absl::StatusOr<RunOutput> TrainGnn(const ResolvedRun& run, const Registry& registry, const RunControl& control) {
  const ComponentChoice* choice = run.Component(ComponentKind::kFeatureLoader);
  if (choice == nullptr) {
    return absl::InvalidArgumentError(
        "a gnn model trains for real with a feature_loader (none, pagraph.static_cache, brgraph, brgraph.two_level) "
        "that names its graph: add feature_loader = { use = \"none\", graph = \"cora\" }");
  }
  const ModelShape& shape = run.model->shape;
  // The [real] settings a gnn honours (the optimizer's), and those it refuses rather than ignore.
  ParamReader read_real(run.sections.at("real"), "[real]");
  const std::string device = read_real.Get<std::string>("device");
  const std::string loss_kind = read_real.Get<std::string>("loss");
  const std::int64_t delay = read_real.Get<std::int64_t>("delay");
  const double momentum = read_real.Get<double>("momentum");
  const double weight_decay = read_real.Get<double>("weight_decay");
  TESTBED_RETURN_IF_ERROR(read_real.status());
  if (device != "cpu") {
    return absl::UnimplementedError(absl::StrCat("[real] device = \"", device,
                                                 "\": a gnn trains for real on the CPU only (set device = \"cpu\")"));
  }
  if (loss_kind != "cross_entropy" || delay != 0) {
    return absl::InvalidArgumentError(
        "[real] a gnn trains with loss = \"cross_entropy\" and delay = 0 (synchronous) only");
  }
  const int dp = std::max(1, run.parallel.dp);
  if (run.parallel.tp != 1 || run.parallel.pp != 1) {
    return absl::InvalidArgumentError("[parallel] a gnn trains for real with data parallelism only (tp = pp = 1)");
  }
  const std::int64_t micro_batch = run.train.micro_batch;
  std::int64_t mbs = std::max<std::int64_t>(1, run.train.micro_batches);
  if (run.train.global_batch > 0) {
    if (run.train.global_batch % (dp * micro_batch) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("[train] global_batch = ", run.train.global_batch,
                                                     " is not a multiple of dp x micro_batch = ", dp * micro_batch));
    }
    mbs = run.train.global_batch / (dp * micro_batch);
  }
  // The graph comes from the loader's parameters; each hosted rank gets a loader of its own.
  TESTBED_ASSIGN_OR_RETURN(auto first_loader, registry.Create<FeatureLoader>(choice->name, choice->params));
  const GraphSource source = first_loader->source();
  const auto t_build = Clock::now();
  TESTBED_ASSIGN_OR_RETURN(SourceGraph g, LoadSourceGraph(source, "feature_loader"));
  if (g.features.size() == 0) {
    TESTBED_RETURN_IF_ERROR(CheckMemoryAllowance(
        absl::StrCat("the features of ", g.graph.vertices, " vertices x ", shape.inputs),
        8.0 * static_cast<double>(g.graph.vertices) * static_cast<double>(shape.inputs), 0,
        "train on a smaller graph for real, or simulate this one (backend = \"sim\")"));
    GenerateFeatures(g, shape.inputs, std::max<std::int64_t>(2, shape.vocab), source.graph_seed);
  } else if (g.features.cols() != shape.inputs) {
    return absl::InvalidArgumentError(absl::StrCat("[model] inputs = ", shape.inputs, " does not fit ", source.graph,
                                                   ", whose vertices have ", g.features.cols(),
                                                   " features: set inputs = ", g.features.cols()));
  }
  const double build_s = Since(t_build);
  std::vector<std::int64_t> degrees(static_cast<size_t>(g.graph.vertices));
  for (std::int64_t v = 0; v < g.graph.vertices; ++v) degrees[static_cast<size_t>(v)] = g.graph.Degree(v);
  FeatureGraph fg;
  fg.vertices = g.graph.vertices;
  fg.degrees = degrees;
  fg.row_bytes = 4 * shape.inputs;
  fg.threads = source.threads;
  std::vector<int> fanouts(shape.fanouts.begin(), shape.fanouts.end());

  GnnTrainingSetup setup;
  setup.graph = &g;
  setup.degrees = std::move(degrees);
  setup.feature_graph = fg;
  setup.feature_graph.degrees = setup.degrees;
  setup.fanouts = fanouts;
  setup.micro_batch = micro_batch;
  setup.micro_batches = mbs;
  setup.dp = dp;
  setup.seed = run.seed;
  setup.optimizer = run.train.optimizer;
  setup.learning_rate = run.train.learning_rate;
  setup.momentum = momentum;
  setup.weight_decay = weight_decay;
  setup.loader_name = choice->name;

  // One replica per rank this process hosts (every rank with `local`, its own under mpirun),
  // each on its own thread; the ranks agree every step on whether to go on.
  TESTBED_ASSIGN_OR_RETURN(auto communicator,
                           registry.Create<Communicator>(run.Component(ComponentKind::kCommunicator)->name,
                                                         run.Component(ComponentKind::kCommunicator)->params));
  TESTBED_ASSIGN_OR_RETURN(auto endpoints, communicator->Connect(dp));
  const size_t hosted = endpoints.size();
  std::vector<absl::StatusOr<std::vector<GnnStepFigures>>> results(hosted, absl::UnknownError("not run"));
  std::vector<double> setup_rows(hosted, 0), accuracy(hosted, 0);
  std::vector<std::shared_ptr<FeatureLoader>> loaders = {first_loader};
  while (loaders.size() < hosted) {
    TESTBED_ASSIGN_OR_RETURN(auto l, registry.Create<FeatureLoader>(choice->name, choice->params));
    loaders.push_back(std::move(l));
  }
  auto train_rank = [&](size_t e) -> absl::StatusOr<std::vector<GnnStepFigures>> {
    CommGroup& comm = *endpoints[e];
    TESTBED_ASSIGN_OR_RETURN(auto replica, GnnReplica::Create(setup, shape, loaders[e], comm));
    setup_rows[e] = replica->setup_rows();
    std::vector<GnnStepFigures> steps;
    for (std::int64_t it = 0; it < run.train.steps; ++it) {
      std::vector<double> stop = {control.cancelled() ? 1.0 : 0.0};
      TESTBED_ASSIGN_OR_RETURN(CommRequestPtr req, comm.IAllReduce(stop.data(), stop.data(), 1, DataType::kFloat64,
                                                                   ReduceOp::kMax));
      TESTBED_RETURN_IF_ERROR(req->Wait());
      if (stop[0] > 0) break;
      TESTBED_ASSIGN_OR_RETURN(GnnStepFigures f, replica->Step(it));
      steps.push_back(f);
    }
    TESTBED_ASSIGN_OR_RETURN(accuracy[e], replica->TestAccuracy());
    return steps;
  };
  OnHostedRanks(results, train_rank);
  for (auto& r : results) TESTBED_RETURN_IF_ERROR(r.status());
  // Every rank holds the all-reduced figures: the first hosted one's are the run's.
  const std::vector<GnnStepFigures>& steps = *results[0];
  if (steps.empty()) return absl::CancelledError("stopped before the first training step");
  double setup_peak = 0;
  for (double r : setup_rows) setup_peak = std::max(setup_peak, r);
  // Per step and replica (the steps' figures are sums over the replicas), and the loss curve.
  double bytes = 0, copy_s = 0, detect_s = 0, wall = 0, copied_rows = 0, input_rows = 0, resident_peak = 0,
         capacity_peak = 0;
  std::vector<std::int64_t> step_ids, resident;
  std::vector<double> loss, copy_b, copy_t, detect, wall_s;
  for (size_t i = 0; i < steps.size(); ++i) {
    const GnnStepFigures& f = steps[i];
    step_ids.push_back(static_cast<std::int64_t>(i));
    loss.push_back(f.loss);
    copy_b.push_back(f.copy_bytes / dp);
    copy_t.push_back(f.copy_s / dp);
    detect.push_back(f.detect_s / dp);
    resident.push_back(static_cast<std::int64_t>(f.resident_rows));
    wall_s.push_back(f.wall_s);
    bytes += copy_b.back();
    copy_s += copy_t.back();
    detect_s += detect.back();
    // The measured iteration: the mean after the first step (which warms caches and allocators).
    if (i > 0 || steps.size() == 1) wall += f.wall_s;
    copied_rows += f.copy_rows;
    input_rows += f.input_rows;
    resident_peak = std::max(resident_peak, f.resident_rows);
    capacity_peak = std::max(capacity_peak, f.capacity_rows);
  }
  const auto n = static_cast<double>(steps.size());
  wall /= steps.size() > 1 ? n - 1 : 1.0;
  RunOutput out;
  MetricSet& m = out.metrics;
  const double row_bytes = static_cast<double>(fg.row_bytes);
  const auto per_epoch = std::max<std::int64_t>(
      1, (static_cast<std::int64_t>(g.seeds.size()) + dp * mbs * micro_batch - 1) / (dp * mbs * micro_batch));
  m.Add("final_loss", loss.back(), "nats/sample", Better::kLower);
  m.Add("first_loss", loss.front(), "nats/sample");
  if (!g.test.empty()) m.Add("test_accuracy", accuracy[0], "1", Better::kHigher);
  m.Add("dp", dp, "replicas");
  m.Add("graph_vertices", static_cast<double>(g.graph.vertices), "vertices");
  m.Add("graph_edges", static_cast<double>(g.graph.edges()), "edges");
  m.Add("graph_generated", g.generated ? 1 : 0, "1");
  m.Add("graph_build_s", build_s, "s");
  m.Add("feature_row_bytes", row_bytes, "B");
  m.Add("feature_copy_bytes_per_step", bytes / n, "B", Better::kLower);
  m.Add("feature_setup_copy_bytes", setup_peak * row_bytes, "B", Better::kLower);
  m.Add("feature_copy_fraction", input_rows > 0 ? copied_rows / input_rows : 0, "1", Better::kLower);
  m.Add("feature_rows_resident_peak", static_cast<double>(resident_peak), "rows");
  m.Add("feature_device_mib_peak", static_cast<double>(capacity_peak) * row_bytes / 1048576.0, "MiB", Better::kLower);
  m.Add("duplicate_detection_s_per_step", detect_s / n, "s", Better::kLower);
  m.Add("measured_host_copy_s_per_step", copy_s / n, "s", Better::kLower);
  m.Add("measured_iteration_s", wall, "s", Better::kLower);
  m.Add("iterations_per_epoch", static_cast<double>(per_epoch), "iterations");
  m.Add("measured_epoch_time_s", wall * static_cast<double>(per_epoch), "s", Better::kLower);

  Table curve;
  curve.name = "loss_curve";
  curve.columns = {{"step", "", step_ids},          {"loss", "nats/sample", loss},  {"copy_bytes", "B", copy_b},
                   {"copy_s", "s", copy_t},     {"detect_s", "s", detect},      {"resident_rows", "rows", resident},
                   {"wall_s", "s", wall_s}};
  out.tables.push_back(std::move(curve));
  out.notes.push_back(absl::StrCat("graph: ", g.description, g.generated ? "; features and labels generated" : ""));
  out.notes.push_back(
      "feature rows on the device: host memory standing in for it (memcpy per row, timed); each replica a rank "
      "of the communicator, the gradients all-reduced every step");
  return out;
}

}  // namespace testbed::exec
