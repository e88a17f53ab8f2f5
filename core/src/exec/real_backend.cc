#include "exec/real_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <tuple>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/planning_chain.h"
#include "absl/strings/str_split.h"
#include "engine/data_files.h"
#include "engine/stage_costs.h"
#include "exec/collective_latency.h"
#include "exec/data_sources.h"
#include "exec/executor.h"
#include "exec/gnn_training.h"
#include "exec/moe_training.h"
#include "exec/profiled_device_model.h"
#include "memory_budget.h"
#include "sim/simulator.h"
#include "testbed/collective.h"
#include "testbed/communicator.h"
#include "testbed/compressor.h"
#include "testbed/partitioner.h"
#include "testbed/pipeline_program.h"
#include "testbed/scheduler.h"
#include "testbed/status_macros.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/gemm.h"
#include "testbed/train/labeled_data.h"

namespace testbed {
namespace {

// The executor's "cluster": one node of `n` ranks joined through memory.
absl::StatusOr<Cluster> CpuCluster(int n, double bandwidth, double latency_s = 2e-6) {
  NodeType type;
  type.name = "cpu";
  type.devices = n;
  type.device.name = "cpu-core";
  type.device.vendor = "host";
  type.device.peak_flops[Precision::kFp32] = 5e10;
  type.device.peak_flops[Precision::kFp16] = 5e10;
  type.device.peak_flops[Precision::kBf16] = 5e10;
  type.device.memory_bytes = std::int64_t{1} << 34;
  type.device.memory_bandwidth_bytes_per_s = bandwidth;
  type.hubs = {"memory"};
  // Latency: a few microseconds for planning; the prediction of a run uses a measured one.
  LinkSpec link{"memory", LinkKind::kOther, bandwidth, latency_s};
  for (int i = 0; i < n; ++i) type.links.push_back({absl::StrCat("gpu", i), "memory", link});
  return Cluster::Build("cpu", {NodeGroup{type, 1}});
}

// Where Debian's dataset-fashion-mnist package installs the IDX files.
constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// The Fashion-MNIST training set from `dir` (its gzip IDX files), the first `max_samples`
// (0: all).
absl::StatusOr<train::LabeledData> LoadFashionMnist(const std::string& dir, std::int64_t max_samples) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "[data] dataset \"fashion-mnist\": no directory '", dir, "'; install the Debian package dataset-fashion-mnist "
        "(it puts the data set in ", kFashionMnistDir, ") or set [data] path to a directory holding "
        "train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz"));
  }
  const std::filesystem::path root(dir);
  return train::LoadIdx((root / "train-images-idx3-ubyte.gz").string(), (root / "train-labels-idx1-ubyte.gz").string(),
                        max_samples, 10);
}

// Fits the model to a labelled image set of `features` pixels per sample (one channel, square
// images): an mlp takes them as its inputs; a cnn's channels and image_size must describe them.
absl::Status FitShapeToImages(ModelShape& shape, std::int64_t features, const std::string& dataset) {
  if (shape.family == "cnn") {
    std::int64_t side = 0;
    while ((side + 1) * (side + 1) <= features) ++side;
    if (side * side != features) {
      return absl::InvalidArgumentError(absl::StrCat("[data] dataset \"", dataset, "\": samples of ", features,
                                                     " features are not square images, which a cnn needs"));
    }
    if (shape.channels != 1 || shape.image_size != side) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[model] channels = ", shape.channels, ", image_size = ", shape.image_size, " do not fit [data] dataset \"",
          dataset, "\", whose images have 1 channel of ", side, "x", side, " pixels: set channels = 1, image_size = ",
          side));
    }
  }
  shape.inputs = features;
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> Make(const Registry& registry, const ComponentChoice& choice) {
  return registry.Create<T>(choice.name, choice.params);
}

struct Training {
  Plan plan;
  Schedule schedule;
  exec::ExecutionResult result;
};

}  // namespace

const BackendInfo& RealBackend::Info() {
  static const BackendInfo info = [] {
    BackendInfo b;
    b.name = "real";
    b.doc = "real training on ranks (threads, MPI processes) with the built-in engine";
    b.default_metric = "final_loss";
    b.needs_cluster = false;
    b.kinds = {{ComponentKind::kPartitioner, true, "megatron.uniform"},
               {ComponentKind::kScheduler, true, "1f1b"},
               {ComponentKind::kCommunicator, true, "local"},
               {ComponentKind::kCompressor, false, ""},
               {ComponentKind::kDeviceModel, true, "roofline"},
               {ComponentKind::kCollective, true, "ring"}};
    AddPlanningKinds(b);
    b.sections["data"] = {
        ParamSpec::Choice("dataset", "text", {"text", "digits", "fashion-mnist"})
            .Doc("text: the shipped character corpus (gpt models); digits: UCI optdigits, 8x8 images (mlp or cnn "
                 "models); fashion-mnist: Zalando's 28x28 clothing images, the training set (mlp or cnn models; "
                 "Debian package dataset-fashion-mnist); a gnn model reads the graph its feature_loader names instead"),
        ParamSpec::String("path", "")
            .Doc("data file, or for fashion-mnist the directory of its IDX files (default: the shipped file; for "
                 "fashion-mnist /usr/share/datasets/fashion-mnist)"),
        ParamSpec::Int("max_samples", 0).Min(0).Unit("samples")
            .Doc("digits, fashion-mnist: use only the first this many samples, before the validation split (0: all)"),
        ParamSpec::Double("validation_fraction", 0.1).Range(0.01, 0.5).Doc("held-out share of the data"),
        ParamSpec::Int("validation_samples", 64).Min(1).Unit("samples").Doc("text: held-out windows evaluated"),
    };
    b.sections["real"] = {
        ParamSpec::Bool("check_against_single", true)
            .Doc("also train the same model single-process and report the largest loss and gradient-norm differences"),
        ParamSpec::Double("max_loss_diff_vs_single", 0.0)
            .Min(0)
            .Unit("nats/token")
            .Doc("with check_against_single: the run fails when a step's loss differs from single-process "
                 "training by more than this (0: the difference is only reported)"),
        ParamSpec::Bool("predict", true).Doc("profile the layers here and report the simulator's prediction"),
        ParamSpec::Int("profile_repeats", 3).Range(1, 100).Doc("timings per layer in the profile (median kept)"),
        ParamSpec::Choice("compress", "all", {"all", "embedding"})
            .Doc("which gradients go through the compressor: all, or the embedding's only (sparse ones)"),
        ParamSpec::Choice("device", "cpu", {"cpu", "cuda"})
            .Doc("where the layers' matrix products run: cpu (Eigen) or cuda (cuBLAS, rank r on GPU r modulo the "
                 "GPUs this process sees; the rest of training stays on the CPU)"),
        ParamSpec::Double("target_loss", 0.0).Min(0)
            .Doc("report the steps and time until the training loss first reaches this (0: not reported)"),
        ParamSpec::Choice("loss", "cross_entropy", {"cross_entropy", "squared"})
            .Doc("the classifier's loss: softmax cross-entropy, or half the squared distance of the outputs to the "
                 "one-hot label (with an mlp of 0 hidden layers: least-squares regression); gpt models: "
                 "cross_entropy only"),
        ParamSpec::Double("momentum", 0.9).Range(0, 0.999).Doc("heavy-ball momentum of the optimizer \"sgd\""),
        ParamSpec::Double("weight_decay", 0.0).Min(0)
            .Doc("L2 regularisation: weight_decay x w is added to every gradient (before any delay)"),
        ParamSpec::Int("delay", 0).Range(0, 1024).Unit("steps")
            .Doc("delayed (asynchronous) SGD: each update applies the gradient computed this many steps earlier, "
                 "none while there is none yet (0: synchronous)"),
        ParamSpec::Choice("delay_kind", "fixed", {"fixed", "random"})
            .Doc("fixed: every update is `delay` steps stale; random: uniform on 0..delay, drawn per step from the "
                 "run's seed"),
        ParamSpec::String("routing_trace", "")
            .Doc("moe-gpt: write the measured routing (tokens each rank sent each expert of each MoE layer, per "
                 "iteration) to this HDF5 routing trace, which load balancers replay with routing = \"<file>\""),
    };
    return b;
  }();
  return info;
}

absl::StatusOr<RunOutput> RealBackend::Run(const ResolvedRun& run, const Registry& registry,
                                           const RunControl& control) {
  // A gnn trains on the graph its feature loader names, batch by batch (exec/gnn_training.h).
  if (run.model->shape.family == "gnn") return exec::TrainGnn(run, registry, control);
  const ParamSet& data = run.sections.at("data");
  const ParamSet& real = run.sections.at("real");
  ParamReader read_data(data, "[data]"), read_real(real, "[real]");
  const std::string dataset = read_data.Get<std::string>("dataset");
  const double validation_fraction = read_data.Get<double>("validation_fraction");
  std::string path = read_data.Get<std::string>("path");
  const std::int64_t data_validation_samples = read_data.Get<std::int64_t>("validation_samples");
  const std::int64_t data_max_samples = read_data.Get<std::int64_t>("max_samples");
  const std::string real_compress = read_real.Get<std::string>("compress");
  const std::string real_device = read_real.Get<std::string>("device");
  const bool real_predict = read_real.Get<bool>("predict");
  const double real_target_loss = read_real.Get<double>("target_loss");
  const bool real_check_against_single = read_real.Get<bool>("check_against_single");
  const double real_max_loss_diff_vs_single = read_real.Get<double>("max_loss_diff_vs_single");
  const std::int64_t real_profile_repeats = read_real.Get<std::int64_t>("profile_repeats");
  const std::string real_loss = read_real.Get<std::string>("loss");
  const double real_momentum = read_real.Get<double>("momentum");
  const double real_weight_decay = read_real.Get<double>("weight_decay");
  const std::int64_t real_delay = read_real.Get<std::int64_t>("delay");
  const std::string real_delay_kind = read_real.Get<std::string>("delay_kind");
  const std::string real_routing_trace = read_real.Get<std::string>("routing_trace");
  TESTBED_RETURN_IF_ERROR(read_data.status());
  TESTBED_RETURN_IF_ERROR(read_real.status());
  if (path.empty() && dataset == "fashion-mnist") {
    path = kFashionMnistDir;
  } else if (path.empty()) {
    TESTBED_ASSIGN_OR_RETURN(path, FindData(dataset == "text" ? "text/gpl-3.0.txt" : "digits/digits.csv.gz"));
  }
  ModelShape shape = run.model->shape;
  // The training engine's transformer is multi-head with a GeLU FFN, standard attention and
  // learned positions; the newer features are modelled by the simulator only.
  for (auto [key, value, supported] : {std::tuple<const char*, std::string, std::string>{"ffn", shape.ffn, "gelu"},
                                       {"attention", shape.attention, "standard"},
                                       {"positions", shape.positions, "learned"}}) {
    if (value != supported) {
      return absl::UnimplementedError(absl::StrCat("[model] ", key, " = \"", value, "\": real training runs ", key,
                                                   " = \"", supported, "\" only (the simulator models the others)"));
    }
  }
  if (run.parallel.cp > 1) {
    return absl::UnimplementedError(absl::StrCat("[parallel] cp = ", run.parallel.cp,
                                                 ": real training has no context parallelism (the simulator models it)"));
  }
  if (run.train.precision == Precision::kFp8) {
    return absl::UnimplementedError(
        "[train] precision = \"fp8\": real training has no FP8 arithmetic (the simulator models FP8 training)");
  }
  if (shape.kv_heads != 0 && shape.kv_heads != shape.heads) {
    return absl::UnimplementedError(absl::StrCat("[model] kv_heads = ", shape.kv_heads,
                                                 ": real training runs multi-head attention only (kv_heads = heads)"));
  }
  std::optional<train::CharCorpus> corpus;
  std::optional<std::pair<train::LabeledData, train::LabeledData>> labeled;
  exec::BatchSource source;
  std::function<absl::StatusOr<exec::Batch>()> validation, training_set;
  if (dataset == "text") {
    if (shape.family != "gpt" && shape.family != "moe-gpt") {
      return absl::InvalidArgumentError("[data] dataset \"text\" trains a gpt or moe-gpt model");
    }
    if (real_loss != "cross_entropy") {
      return absl::InvalidArgumentError(absl::StrCat("[real] loss = \"", real_loss, "\" is for classifiers (mlp, cnn on "
                                                     "digits or fashion-mnist); a gpt model trains with cross_entropy"));
    }
    TESTBED_ASSIGN_OR_RETURN(corpus, train::CharCorpus::Load(path, validation_fraction));
    // The vocabulary is the corpus's; weights are not tied (the engine's head is its own).
    shape.vocab = corpus->vocab_size();
    shape.tied_embeddings = false;
    source = exec::TextSource(*corpus, shape.seq_len, run.seed);
    validation = exec::TextValidation(*corpus, shape.seq_len, data_validation_samples);
  } else {
    if (shape.family != "mlp" && shape.family != "cnn") {
      return absl::InvalidArgumentError(
          absl::StrCat("[data] dataset \"", dataset, "\" trains an mlp or a cnn model, not family \"", shape.family,
                       "\""));
    }
    train::LabeledData all;
    if (dataset == "fashion-mnist") {
      TESTBED_ASSIGN_OR_RETURN(all, LoadFashionMnist(path, data_max_samples));
    } else {
      TESTBED_ASSIGN_OR_RETURN(all, train::LoadDigits(path));
      if (data_max_samples > 0 && data_max_samples < all.size()) {
        std::vector<std::int64_t> first(static_cast<size_t>(data_max_samples));
        for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<std::int64_t>(i);
        all = all.Rows(first);
      }
    }
    labeled = train::SplitTrainValidation(all, validation_fraction, 1234);
    TESTBED_RETURN_IF_ERROR(FitShapeToImages(shape, labeled->first.features.cols(), dataset));
    shape.vocab = labeled->first.classes;
    source = exec::LabeledSource(labeled->first, run.seed);
    validation = exec::LabeledValidation(labeled->second);
    training_set = exec::LabeledValidation(labeled->first);
  }
  TESTBED_ASSIGN_OR_RETURN(ModelGraph graph, BuildModelGraph(shape));
  if (shape.family == "moe-gpt") {
    // Its own loop (exec/moe_training.h): expert parallelism by all-to-all-v inside the layers.
    if (real_device != "cpu") {
      return absl::UnimplementedError("[real] device = \"cuda\": a moe-gpt model trains for real on the CPU only");
    }
    if (real_delay != 0) return absl::InvalidArgumentError("[real] a moe-gpt model trains synchronously (delay = 0)");
    exec::MoeTrainingOptions mo;
    mo.graph = &graph;
    mo.source = source;
    mo.momentum = real_momentum;
    mo.weight_decay = real_weight_decay;
    mo.routing_trace = real_routing_trace;
    return exec::TrainMoe(run, registry, control, mo);
  }

  const int dp = std::max(1, run.parallel.dp);
  const int world = run.parallel.tp * run.parallel.pp * dp;
  {
    // Real training keeps fp32 weights, gradients and two Adam moments (16 bytes a parameter)
    // on every rank; the local communicator's ranks are threads of this process, so it holds
    // every replica (and the single-rank reference when checked against it). Activations
    // come on top: the estimate is a floor.
    const double params = static_cast<double>(graph.TotalParams());
    const bool threads = run.Component(ComponentKind::kCommunicator)->name == "local";
    double replicas = threads ? dp : 1.0 / (run.parallel.tp * run.parallel.pp);
    if (real_check_against_single && threads) replicas += 1;
    TESTBED_RETURN_IF_ERROR(CheckMemoryAllowance(
        absl::StrCat("training model '", shape.name, "' for real (", absl::StrFormat("%.3g", params), " parameters)"),
        16.0 * params * replicas, 0, "train a smaller model for real, or simulate this one (backend = \"sim\")"));
  }
  const double bandwidth = exec::MeasureMemcpyBandwidth();
  TESTBED_ASSIGN_OR_RETURN(Cluster cluster, CpuCluster(world, bandwidth));
  TESTBED_ASSIGN_OR_RETURN(auto device_model, Make<DeviceModel>(registry, *run.Component(ComponentKind::kDeviceModel)));
  TESTBED_ASSIGN_OR_RETURN(auto scheduler, Make<Scheduler>(registry, *run.Component(ComponentKind::kScheduler)));
  TESTBED_ASSIGN_OR_RETURN(auto communicator,
                           Make<Communicator>(registry, *run.Component(ComponentKind::kCommunicator)));
  ParallelSettings parallel = run.parallel;
  parallel.dp = dp;
  PlanningContext ctx{graph, cluster, run.train, parallel, *device_model, run.seed, {}};
  StepInputs step_inputs;
  TESTBED_ASSIGN_OR_RETURN(PlanningOutcome planned, RunPlanningChain(run, registry, ctx, step_inputs));
  Plan plan = std::move(planned.plan);
  if (plan.zero_stage > 0 && run.Component(ComponentKind::kCompressor) != nullptr) {
    return absl::UnimplementedError("real execution with a compressor runs without ZeRO sharding (zero_stage = 0)");
  }
  SchedulingContext sctx{graph, cluster, plan, run.train, *device_model};
  TESTBED_ASSIGN_OR_RETURN(Schedule schedule, CallPlugin("scheduler", run.Component(ComponentKind::kScheduler)->name,
                                                         [&] { return scheduler->BuildSchedule(sctx); }));
  if (schedule.overlapping_iterations() && run.train.steps > 1) {
    // No flush between iterations (PipeDream-2BW): the schedule covers every step, run whole.
    sctx.iterations = static_cast<int>(run.train.steps);
    TESTBED_ASSIGN_OR_RETURN(schedule, CallPlugin("scheduler", run.Component(ComponentKind::kScheduler)->name,
                                                  [&] { return scheduler->BuildSchedule(sctx); }));
  }
  TESTBED_RETURN_IF_ERROR(schedule.Check());

  std::function<absl::StatusOr<std::shared_ptr<Compressor>>()> make_compressor;
  if (const ComponentChoice* c = run.Component(ComponentKind::kCompressor)) {
    const ComponentChoice choice = *c;
    make_compressor = [&registry, choice]() { return Make<Compressor>(registry, choice); };
  }
  std::function<bool(int)> compress_layer;
  if (real_compress == "embedding") {
    compress_layer = [&graph](int l) { return graph.layers[static_cast<size_t>(l)].kind == LayerKind::kEmbedding; };
  }
  exec::ExecutorInputs inputs{.model = graph,
                              .plan = plan,
                              .schedule = schedule,
                              .train = run.train,
                              .data = source,
                              .seed = run.seed,
                              .make_compressor = make_compressor,
                              .compress_layer = compress_layer,
                              .validation = validation};
  // The optimizer's settings beyond [train], the same for the single-process reference.
  auto set_optimizer = [&](exec::ExecutorInputs& in) -> absl::Status {
    TESTBED_ASSIGN_OR_RETURN(in.loss, train::LossKindFromName(real_loss));
    in.sgd_momentum = real_momentum;
    in.weight_decay = real_weight_decay;
    in.delay = train::DelayOptions{static_cast<int>(real_delay), real_delay_kind == "random", run.seed};
    return absl::OkStatus();
  };
  TESTBED_RETURN_IF_ERROR(set_optimizer(inputs));
  inputs.training_set = training_set;
  // Ctrl-C stops training at the next step where the ranks are threads of this process (under
  // mpirun each process would see it at its own moment).
  const bool thread_ranks = run.Component(ComponentKind::kCommunicator)->name == "local";
  if (thread_ranks) inputs.cancelled = control.cancelled;
  const bool on_gpu = real_device == "cuda";
  if (on_gpu) {
    inputs.make_gemm = [](int world_rank) -> absl::StatusOr<std::unique_ptr<train::GemmBackend>> {
      const int gpus = train::CudaDeviceCount();
      if (gpus == 0) {
        return absl::UnavailableError("[real] device = \"cuda\" but no usable GPU (or built without CUDA)");
      }
      return train::MakeCublasGemm(world_rank % gpus);
    };
  }
  TESTBED_ASSIGN_OR_RETURN(auto endpoints, communicator->Connect(world));
  const bool predict = real_predict;
  double allreduce_latency = 0;
  if (predict) {
    TESTBED_ASSIGN_OR_RETURN(allreduce_latency, exec::MeasureAllReduceLatency(endpoints, 30));
  }
  TESTBED_ASSIGN_OR_RETURN(exec::ExecutionResult result, exec::Execute(inputs, std::move(endpoints)));

  RunOutput out;
  MetricSet& m = out.metrics;
  const auto& steps = result.steps;
  if (steps.empty()) return absl::InternalError("no training step ran");
  const bool squared = real_loss == "squared";
  const std::string loss_unit = dataset == "text" ? "nats/token" : squared ? "1/sample" : "nats/sample";
  const std::string eval_unit = squared ? "1" : "nats";
  m.Add("final_loss", steps.back().loss, loss_unit, Better::kLower);
  m.Add("first_loss", steps.front().loss, loss_unit);
  m.Add("final_grad_norm", steps.back().grad_norm, "1");
  m.Merge(plan.planner_metrics);
  m.Add("ranks", world, "ranks");
  m.Add("tp", plan.tp(0), "ranks");
  m.Add("pp", plan.pp(), "stages");
  m.Add("dp", plan.dp(0), "replicas");
  m.Add("micro_batches", static_cast<double>(plan.MicroBatches(0, 0)), "micro-batches");
  m.Add("pipeline_bytes_per_step", result.pipeline_bytes_per_step, "B");
  m.Add("data_parallel_bytes_per_step", result.data_parallel_bytes_per_step, "B");
  m.Add("tensor_parallel_bytes_per_step", result.tensor_parallel_bytes_per_step, "B");
  // Tensor-parallel all-reduces that ran while the rank computed something else.
  m.Add("tensor_parallel_overlapped_per_step", result.tensor_parallel_overlapped_per_step, "all-reduces");
  if (schedule.weight_versions() > 1) {
    // PipeDream-2BW's memory, as allocated: the second weight version beside the weights a
    // stage holds, and the gradients of an iteration kept apart while the next accumulates.
    m.Add("stage_weight_bytes", result.weight_bytes, "B");
    m.Add("weight_stash_bytes", result.weight_stash_bytes, "B");
    m.Add("held_gradient_bytes", result.held_gradient_bytes, "B");
  }
  if (make_compressor) {
    m.Add("encode_s_per_step", result.encode_s_per_step, "s", Better::kLower);
    m.Add("decode_s_per_step", result.decode_s_per_step, "s", Better::kLower);
    m.Add("compressed_dense_bytes_per_step", result.compressed_dense_bytes_per_step, "B");
    m.Add("compressed_wire_bytes_per_step", result.compressed_wire_bytes_per_step, "B", Better::kLower);
    if (result.compressed_dense_bytes_per_step > 0) {
      // The paper's "sparse communication" saving: wire bytes of the compressed tensors
      // against sending them dense (float32).
      m.Add("compressed_traffic_saving",
            1.0 - result.compressed_wire_bytes_per_step / result.compressed_dense_bytes_per_step, "1", Better::kHigher);
    }
  }
  if (result.validation_loss >= 0) {
    m.Add("validation_loss", result.validation_loss, eval_unit, Better::kLower);
    m.Add("validation_accuracy", result.validation_accuracy, "1", Better::kHigher);
  }
  if (result.train_set_loss >= 0) {
    // The trained model on the whole training split: the generalisation gap is how much worse
    // it does on the held-out split.
    m.Add("train_set_loss", result.train_set_loss, eval_unit, Better::kLower);
    m.Add("train_set_accuracy", result.train_set_accuracy, "1", Better::kHigher);
    if (result.validation_loss >= 0) {
      m.Add("generalization_gap", result.validation_loss - result.train_set_loss, eval_unit, Better::kLower);
    }
  }
  if (real_delay > 0) {
    double applied = 0;
    int updates = 0;
    for (const exec::StepRecord& r : steps) {
      if (r.applied_delay < 0) continue;
      applied += r.applied_delay;
      ++updates;
    }
    m.Add("updates_applied", updates, "steps");
    m.Add("mean_applied_delay", updates > 0 ? applied / updates : 0.0, "steps");
    if (real_delay_kind == "fixed" && labeled) {
      // The delayed-SGD paper's bound on the generalisation error of a quadratic convex problem,
      // O~((T - tau) / (n tau)), at this run's T (steps), n (training samples) and tau, without its
      // constants: the shape to hold the measured gaps' trend against, not a prediction.
      const double t = static_cast<double>(run.train.steps), n = static_cast<double>(labeled->first.size());
      const double tau = static_cast<double>(real_delay);
      m.Add("bound_shape", (t - tau) / (n * tau), "1");
    }
  }
  // Measured step time: the mean after the first step (which warms caches and allocators).
  double measured = 0;
  int counted = 0;
  for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i) {
    measured += steps[i].wall_s;
    ++counted;
  }
  measured /= std::max(1, counted);
  if (const double target = real_target_loss; target > 0) {
    // Time to a target loss: measured steps and wall time until the loss first reaches it.
    double elapsed = 0;
    std::int64_t reached = -1;
    for (size_t i = 0; i < steps.size() && reached < 0; ++i) {
      elapsed += steps[i].wall_s;
      if (steps[i].loss <= target) reached = static_cast<std::int64_t>(i) + 1;
    }
    m.Add("reached_target", reached > 0 ? 1 : 0, "1", Better::kHigher);
    if (reached > 0) {
      m.Add("steps_to_target", static_cast<double>(reached), "steps", Better::kLower);
      m.Add("time_to_target_s", elapsed, "s", Better::kLower);
    }
  }
  const double tokens = static_cast<double>(plan.SamplesPerIteration() * shape.seq_len);
  m.Add("measured_iteration_s", measured, "s", Better::kLower);
  m.Add("measured_tokens_per_s", tokens / measured, "tokens/s", Better::kHigher);

  std::vector<double> single_loss;
  if (real_check_against_single && world > 1) {
    // The same model and data on one rank: the reference every layout must reproduce.
    GridSpec g;
    g.micro_batch = plan.micro_batch;
    g.micro_batches = plan.TotalMicroBatches();
    g.chunks = {StageSpec{0, static_cast<int>(graph.layers.size()), 0}};
    Plan one = GridPlan(g);
    // Same widths per layer (a precision policy's), on one rank.
    one.layers.resize(plan.layers.size());
    for (size_t l = 0; l < plan.layers.size(); ++l) one.layers[l].precision = plan.layers[l].precision;
    TESTBED_ASSIGN_OR_RETURN(Cluster solo, CpuCluster(1, bandwidth));
    SchedulingContext one_ctx{graph, solo, one, run.train, *device_model};
    TESTBED_ASSIGN_OR_RETURN(Schedule one_sched, ExpandPipeline(one_ctx, OneFOneBProgram(1, static_cast<int>(g.micro_batches)),
                                                                ExpandOptions{}));
    ParamSet local_params;
    const ComponentEntry* local = registry.Find(ComponentKind::kCommunicator, "local");
    if (local == nullptr) return absl::NotFoundError("the single-process check needs the 'local' communicator");
    for (const ParamSpec& p : local->decl.params) local_params.Set(p.name(), p.default_value());
    TESTBED_ASSIGN_OR_RETURN(auto local_comm, registry.Create<Communicator>("local", local_params));
    TESTBED_ASSIGN_OR_RETURN(auto one_endpoints, local_comm->Connect(1));
    // The reference trains without compression: it is the exact gradient every arm is held to.
    exec::ExecutorInputs one_inputs{
        .model = graph, .plan = one, .schedule = one_sched, .train = run.train, .data = source, .seed = run.seed};
    TESTBED_RETURN_IF_ERROR(set_optimizer(one_inputs));
    if (schedule.weight_versions() > 1) {
      // PipeDream-2BW's update, W(t+1) = W(t) - lr grad f(W(t-1)), is SGD whose every update
      // applies the gradient of the step before (nothing at the first): delayed SGD, tau = 1.
      one_inputs.delay = train::DelayOptions{1, false, run.seed};
    }
    one_inputs.cancelled = control.cancelled;
    TESTBED_ASSIGN_OR_RETURN(exec::ExecutionResult ref, exec::Execute(one_inputs, std::move(one_endpoints)));
    double loss_diff = 0, norm_diff = 0;
    // A loss or norm that is not finite on either side (training diverged) is no agreement.
    auto gap = [](double a, double b) {
      const double d = std::fabs(a - b);
      return std::isfinite(d) ? d : std::numeric_limits<double>::infinity();
    };
    for (size_t i = 0; i < steps.size() && i < ref.steps.size(); ++i) {
      single_loss.push_back(ref.steps[i].loss);
      loss_diff = std::max(loss_diff, gap(steps[i].loss, ref.steps[i].loss));
      norm_diff = std::max(norm_diff, gap(steps[i].grad_norm, ref.steps[i].grad_norm) /
                                          std::max(1e-30, ref.steps[i].grad_norm));
    }
    m.Add("single_process_final_loss", ref.steps.back().loss, loss_unit);
    m.Add("max_loss_diff_vs_single", loss_diff, loss_unit, Better::kLower);
    m.Add("max_grad_norm_rel_diff_vs_single", norm_diff, "1", Better::kLower);
    const double allowed = real_max_loss_diff_vs_single;
    if (allowed > 0 && !(loss_diff <= allowed)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the loss differs from single-process training of the same model on the same data by up to ", loss_diff,
          " nats/token, more than [real] max_loss_diff_vs_single = ", allowed));
    }
  }

  if (predict) {
    // Ranks are threads (or processes) of this machine: the layers are timed alone on one core
    // and the simulator shares the cores among the tasks running at each moment, so that a
    // pipeline's bubbles leave the busy stages more of the machine.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    TESTBED_ASSIGN_OR_RETURN(exec::ProfiledDeviceModel profile,
                             exec::ProfiledDeviceModel::Profile(graph, plan.micro_batch, plan.tp(0),
                                                                static_cast<int>(real_profile_repeats),
                                                                bandwidth));
    TESTBED_ASSIGN_OR_RETURN(auto collective, Make<Collective>(registry, *run.Component(ComponentKind::kCollective)));
    // Link latency from the measured all-reduce: the collective's cost of a 4-byte all-reduce
    // over every rank with a 1 s link latency counts the latencies on its path.
    double latency = 2e-6;
    if (allreduce_latency > 0) {
      TESTBED_ASSIGN_OR_RETURN(Cluster unit, CpuCluster(world, bandwidth, 1.0));
      std::vector<DeviceId> everyone(static_cast<size_t>(world));
      for (int d = 0; d < world; ++d) everyone[static_cast<size_t>(d)] = d;
      TESTBED_ASSIGN_OR_RETURN(CommPlan probe, collective->PlanCollective(CollectiveOp::kAllReduce, everyone, 4, unit));
      const double hops = probe.IsolatedTime(unit);
      if (hops > 0) latency = allreduce_latency / hops;
      m.Add("measured_allreduce_latency_s", allreduce_latency, "s");
    }
    TESTBED_ASSIGN_OR_RETURN(Cluster measured_cluster, CpuCluster(world, bandwidth, latency));
    SimInputs in{graph, measured_cluster, profile, *collective};
    SimOptions sharing;
    sharing.shared_cores = cores;
    TESTBED_ASSIGN_OR_RETURN(SimResult predicted, Simulate(schedule, in, sharing));
    // A schedule whose iterations overlap covers them all: its time per iteration.
    const double per_iteration = predicted.iteration_time_s / std::max(1, schedule.iterations());
    m.Add("predicted_iteration_s", per_iteration, "s");
    m.Add("prediction_error", per_iteration / measured - 1.0, "1");
  }

  Table curve;
  curve.name = "loss_curve";
  std::vector<std::int64_t> step_ids;
  std::vector<std::int64_t> delay_ids;
  std::vector<double> loss, norm, wall;
  for (size_t i = 0; i < steps.size(); ++i) {
    step_ids.push_back(static_cast<std::int64_t>(i));
    loss.push_back(steps[i].loss);
    norm.push_back(steps[i].grad_norm);
    wall.push_back(steps[i].wall_s);
    delay_ids.push_back(steps[i].applied_delay);
  }
  curve.columns = {{"step", "", step_ids}, {"loss", loss_unit, loss}, {"grad_norm", "1", norm}, {"wall_s", "s", wall}};
  // Delayed SGD: the staleness of each step's update (-1: none applied).
  if (real_delay > 0 || schedule.weight_versions() > 1) curve.columns.push_back({"applied_delay", "steps", delay_ids});
  if (!single_loss.empty()) curve.columns.push_back({"single_process_loss", loss_unit, single_loss});
  out.tables.push_back(std::move(curve));
  for (const Table& t : plan.planner_tables) out.tables.push_back(t);

  Table timeline;
  timeline.name = "timeline";
  std::vector<std::int64_t> task, device, stream;
  std::vector<double> start, end;
  std::vector<std::string> kind, label, stream_name;
  for (const exec::TaskTime& t : result.last_step_tasks) {
    const Task& tk = schedule.task(t.task);
    task.push_back(t.task);
    device.push_back(t.device);
    stream.push_back(tk.stream);
    stream_name.emplace_back("executor");
    start.push_back(t.start_s);
    end.push_back(t.end_s);
    kind.emplace_back(tk.kind == TaskKind::kCompute ? "compute" : "comm");
    label.push_back(schedule.Describe(t.task));
  }
  timeline.columns = {{"task", "", task},     {"device", "", device},     {"stream", "", stream},
                      {"stream_name", "", stream_name}, {"start_s", "s", start}, {"end_s", "s", end},
                      {"kind", "", kind},     {"label", "", label}};
  out.tables.push_back(std::move(timeline));
  out.notes.push_back("timeline: measured task times of the last step (each rank runs its tasks in schedule order)");
  if (on_gpu) {
    out.notes.push_back("matrix products on GPUs (cuBLAS, FP32); the single-process reference ran them on the CPU");
  }
  return out;
}

}  // namespace testbed
