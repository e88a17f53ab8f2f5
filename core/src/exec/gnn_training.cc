#include "exec/gnn_training.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exec/gnn_stack.h"
#include "graph/batch_stream.h"
#include "graph/device_rows.h"
#include "graph/graph_source.h"
#include "memory_budget.h"
#include "testbed/feature_loader.h"
#include "testbed/param_set.h"
#include "testbed/status_macros.h"
#include "testbed/train/adam.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/sgd.h"

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

std::vector<std::int64_t> LabelsOf(const SourceGraph& g, const std::vector<std::int64_t>& vertices) {
  std::vector<std::int64_t> out;
  out.reserve(vertices.size());
  for (std::int64_t v : vertices) out.push_back(g.labels[static_cast<size_t>(v)]);
  return out;
}

train::Matrix<float> HostRows(const train::Matrix<float>& m, const std::vector<std::int64_t>& rows) {
  train::Matrix<float> out(static_cast<Eigen::Index>(rows.size()), m.cols());
  for (size_t i = 0; i < rows.size(); ++i) out.row(static_cast<Eigen::Index>(i)) = m.row(rows[i]);
  return out;
}

struct StepRow {
  double loss = 0, copy_bytes = 0, copy_s = 0, detect_s = 0, wall_s = 0;
  std::int64_t resident_rows = 0;
};

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
  std::vector<std::shared_ptr<FeatureLoader>> loaders;
  for (int r = 0; r < dp; ++r) {
    TESTBED_ASSIGN_OR_RETURN(auto l, registry.Create<FeatureLoader>(choice->name, choice->params));
    loaders.push_back(std::move(l));
  }
  const GraphSource& source = loaders[0]->source();
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

  TESTBED_ASSIGN_OR_RETURN(GnnStack model, GnnStack::Build(shape, shape.inputs, g.classes, run.seed));
  std::unique_ptr<train::Optimizer<float>> optimizer;
  if (run.train.optimizer == "sgd") {
    optimizer = std::make_unique<train::Sgd<float>>(train::SgdOptions{run.train.learning_rate, momentum, 0.0});
  } else {
    train::AdamOptions ao;
    ao.learning_rate = run.train.learning_rate;
    optimizer = std::make_unique<train::Adam<float>>(ao);
  }
  const std::vector<train::Param<float>*> params = model.Params();

  // Each replica's device rows, filled first by its loader's Begin (before training).
  std::vector<DeviceRows> devices;
  devices.reserve(static_cast<size_t>(dp));
  double setup_rows = 0;
  std::int64_t resident_peak = 0, capacity_peak = 0;
  for (int r = 0; r < dp; ++r) {
    devices.emplace_back(g.features);
    TESTBED_ASSIGN_OR_RETURN(FeatureLoad begun, loaders[static_cast<size_t>(r)]->Begin(fg));
    TESTBED_ASSIGN_OR_RETURN(double s, devices.back().Apply(begun, {}, nullptr));
    (void)s;
    setup_rows = std::max(setup_rows, static_cast<double>(begun.copied.size()));
    resident_peak = std::max(resident_peak, devices.back().resident_rows());
  }
  BatchStream stream(g, fanouts, micro_batch, run.seed, source.threads);
  const double seeds_per_iteration = static_cast<double>(dp * mbs * micro_batch);
  std::vector<StepRow> rows;
  double copied_rows = 0, input_rows = 0;
  for (std::int64_t it = 0; it < run.train.steps; ++it) {
    if (control.cancelled()) break;
    const auto t0 = Clock::now();
    StepRow row;
    double seeds = 0;
    for (int r = 0; r < dp; ++r) {
      std::vector<std::int64_t> globals;
      for (std::int64_t m = 0; m < mbs; ++m) globals.push_back(BatchStream::Global(it, m, mbs, dp, r));
      TESTBED_ASSIGN_OR_RETURN(std::vector<train::SampledBatch> batches, stream.Sample(globals));
      for (const train::SampledBatch& b : batches) {
        const std::vector<std::int64_t>& inputs = b.hops.back();
        TESTBED_ASSIGN_OR_RETURN(FeatureLoad load, loaders[static_cast<size_t>(r)]->Next(inputs));
        train::Matrix<float> x;
        absl::StatusOr<double> copy_s = devices[static_cast<size_t>(r)].Apply(load, inputs, &x);
        if (!copy_s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("feature_loader '", choice->name, "', replica ", r,
                                                         ", iteration ", it, ": ", copy_s.status().message()));
        }
        row.copy_s += *copy_s;
        row.detect_s += load.detect_s;
        row.copy_bytes += static_cast<double>(load.copied.size()) * static_cast<double>(fg.row_bytes);
        copied_rows += static_cast<double>(load.copied.size());
        input_rows += static_cast<double>(inputs.size());
        row.resident_rows = std::max(row.resident_rows, devices[static_cast<size_t>(r)].resident_rows());
        resident_peak = std::max(resident_peak, row.resident_rows);
        TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> logits, model.Forward(x, b, degrees));
        // Normalised by the iteration's seeds over every replica and micro-batch: the summed
        // gradients are the mean's, as an all-reduce of the replicas' gradients would give.
        TESTBED_ASSIGN_OR_RETURN(auto lg, train::SoftmaxCrossEntropy<float>(logits, LabelsOf(g, b.hops[0]),
                                                                           seeds_per_iteration));
        TESTBED_RETURN_IF_ERROR(model.Backward(lg.dlogits));
        row.loss += lg.loss;
        seeds += static_cast<double>(b.hops[0].size());
      }
      capacity_peak = std::max(capacity_peak, devices[static_cast<size_t>(r)].capacity_rows());
    }
    // A last batch of an epoch may be short: the loss is the mean over the seeds there were.
    row.loss *= seeds_per_iteration / std::max(1.0, seeds);
    // [real] weight_decay: L2, weight_decay x w added to every gradient (as the executor does).
    if (weight_decay > 0) {
      for (train::Param<float>* p : params) p->grad += static_cast<float>(weight_decay) * p->value;
    }
    optimizer->Step(params);
    for (train::Param<float>* p : params) p->ZeroGrad();
    row.copy_bytes /= dp;
    row.copy_s /= dp;
    row.detect_s /= dp;
    row.wall_s = Since(t0);
    rows.push_back(row);
  }
  if (rows.empty()) return absl::CancelledError("stopped before the first training step");

  // Accuracy on the held-out vertices, sampled as in training (rows read from the host).
  double correct = 0;
  {
    train::Rng rng(run.seed ^ 0x7e57ULL);
    for (size_t first = 0; first < g.test.size(); first += 512) {
      const std::vector<std::int64_t> seeds(g.test.begin() + static_cast<std::ptrdiff_t>(first),
                                            g.test.begin() + static_cast<std::ptrdiff_t>(std::min(g.test.size(), first + 512)));
      TESTBED_ASSIGN_OR_RETURN(train::SampledBatch b, train::SampleNeighbors(g.graph, seeds, fanouts, rng));
      TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> logits, model.Forward(HostRows(g.features, b.hops.back()), b, degrees));
      correct += train::Accuracy<float>(logits, LabelsOf(g, seeds)) * static_cast<double>(seeds.size());
    }
  }

  RunOutput out;
  MetricSet& m = out.metrics;
  const auto n = static_cast<double>(rows.size());
  double bytes = 0, copy_s = 0, detect_s = 0, wall = 0;
  for (const StepRow& r : rows) {
    bytes += r.copy_bytes;
    copy_s += r.copy_s;
    detect_s += r.detect_s;
  }
  for (size_t i = rows.size() > 1 ? 1 : 0; i < rows.size(); ++i) wall += rows[i].wall_s;
  wall /= rows.size() > 1 ? n - 1 : 1.0;
  const double row_bytes = static_cast<double>(fg.row_bytes);
  const auto per_epoch = std::max<std::int64_t>(
      1, (static_cast<std::int64_t>(g.seeds.size()) + dp * mbs * micro_batch - 1) / (dp * mbs * micro_batch));
  m.Add("final_loss", rows.back().loss, "nats/sample", Better::kLower);
  m.Add("first_loss", rows.front().loss, "nats/sample");
  if (!g.test.empty()) m.Add("test_accuracy", correct / static_cast<double>(g.test.size()), "1", Better::kHigher);
  m.Add("dp", dp, "replicas");
  m.Add("graph_vertices", static_cast<double>(g.graph.vertices), "vertices");
  m.Add("graph_edges", static_cast<double>(g.graph.edges()), "edges");
  m.Add("graph_generated", g.generated ? 1 : 0, "1");
  m.Add("graph_build_s", build_s, "s");
  m.Add("feature_row_bytes", row_bytes, "B");
  m.Add("feature_copy_bytes_per_step", bytes / n, "B", Better::kLower);
  m.Add("feature_setup_copy_bytes", setup_rows * row_bytes, "B", Better::kLower);
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
  std::vector<std::int64_t> step, resident;
  std::vector<double> loss, copy_b, copy_t, detect, wall_s;
  for (size_t i = 0; i < rows.size(); ++i) {
    step.push_back(static_cast<std::int64_t>(i));
    loss.push_back(rows[i].loss);
    copy_b.push_back(rows[i].copy_bytes);
    copy_t.push_back(rows[i].copy_s);
    detect.push_back(rows[i].detect_s);
    resident.push_back(rows[i].resident_rows);
    wall_s.push_back(rows[i].wall_s);
  }
  curve.columns = {{"step", "", step},          {"loss", "nats/sample", loss},  {"copy_bytes", "B", copy_b},
                   {"copy_s", "s", copy_t},     {"detect_s", "s", detect},      {"resident_rows", "rows", resident},
                   {"wall_s", "s", wall_s}};
  out.tables.push_back(std::move(curve));
  out.notes.push_back(absl::StrCat("graph: ", g.description, g.generated ? "; features and labels generated" : ""));
  out.notes.push_back(
      "feature rows on the device: host memory standing in for it (memcpy per row, timed); the replicas train in "
      "turn in one process on one model, their gradients averaged");
  return out;
}

}  // namespace testbed::exec
