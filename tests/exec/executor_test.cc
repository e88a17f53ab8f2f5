// Every schedule and parallel layout, run for real on ranks (threads), reproduces
// single-process training: the same loss and gradient norm at every step (float rounding
// aside: partial sums add up in another order). The cnn family too: data parallel on the
// digits, through the executor and the real backend (and on Fashion-MNIST where Debian's
// dataset-fashion-mnist is installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "config/experiment.h"
#include "config/preset_library.h"
#include "config/run_config.h"
#include "engine/plugin_loader.h"
#include "exec/cnn_stack.h"
#include "exec/collective_latency.h"
#include "exec/data_sources.h"
#include "exec/executor.h"
#include "exec/executor_stack.h"
#include "built_components.h"
#include "exec/real_backend.h"
#include "fake_device.h"
#include "on_every_rank.h"
#include "sim_fixtures.h"
#include "stream_ordered_group.h"
#include "testbed/communicator.h"
#include "testbed/host_staging.h"
#include "testbed/partitioner.h"
#include "testbed/scheduler.h"
#include "testbed/status_macros.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/gemm.h"
#include "testbed/train/labeled_data.h"

// Layouts are written as short brace lists; the fields left out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace testbed::exec {
namespace {

struct Layout {
  std::string name;
  int tp = 1, pp = 1, dp = 1, chunks = 1;
  std::string partitioner = "megatron.uniform";
  std::map<std::string, ParamValue> partitioner_params;
  std::string scheduler = "1f1b";
  std::map<std::string, ParamValue> scheduler_params;
  RecomputeMode recompute = RecomputeMode::kNone;
  // The ranks' endpoints: local threads; the same through host staging over a fake device;
  // a fake device without staging (the executor must refuse it); nccl with host buffers;
  // local threads under NCCL's ordering rules (stream_ordered_group.h), bare or staged.
  enum class Endpoints {
    kLocal,
    kStagedFakeDevice,
    kFakeDeviceOnly,
    kNcclHostBuffers,
    kStreamOrdered,
    kStagedStreamOrdered
  } endpoints = Endpoints::kLocal;
  // Matrix products per rank (empty: the default, Eigen).
  std::function<absl::StatusOr<std::unique_ptr<train::GemmBackend>>(int)> make_gemm;
};

// Eigen products, counted per world rank.
class CountingGemm final : public train::GemmBackend {
 public:
  explicit CountingGemm(std::atomic<int>& calls) : calls_(calls) {}
  absl::Status Gemm(const train::Matrix<float>& a, bool ta, const train::Matrix<float>& b, bool tb, float beta,
                    train::Matrix<float>& c) override {
    ++calls_;
    return eigen_.Gemm(a, ta, b, tb, beta, c);
  }
  std::string name() const override { return "counting"; }

 private:
  std::atomic<int>& calls_;
  train::EigenGemm eigen_;
};

class ExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry();
    loader_ = new PluginLoader(*registry_);
    loader_->LoadDirectories({TESTBED_TEST_PLUGIN_DIR});
    auto corpus = train::CharCorpus::Load(TESTBED_TEST_CORPUS);
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = new train::CharCorpus(std::move(*corpus));
  }

  template <typename T>
  static std::shared_ptr<T> Make(const std::string& name, const std::map<std::string, ParamValue>& set = {}) {
    auto made = testing::MakeComponent<T>(*registry_, name, set);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : nullptr;
  }

  static std::vector<StepRecord> Train(const Layout& layout) {
    absl::StatusOr<std::vector<StepRecord>> steps = Run(layout);
    EXPECT_TRUE(steps.ok()) << layout.name << ": " << steps.status();
    return steps.ok() ? *steps : std::vector<StepRecord>{};
  }

  static absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> Endpoints(const Layout& layout, int world) {
    if (layout.endpoints == Layout::Endpoints::kNcclHostBuffers) {
      if (registry_->Find(ComponentKind::kCommunicator, "nccl") == nullptr) {
        return absl::UnavailableError("nccl communicator not built");
      }
      auto comm = Make<Communicator>("nccl", {{"timeout_s", 60.0}, {"host_buffers", true}});
      if (comm == nullptr) return absl::InternalError("nccl communicator not made");
      return comm->Connect(world);
    }
    // Under NCCL's rules a schedule that could deadlock would hang: fail it sooner.
    const bool ordered = layout.endpoints == Layout::Endpoints::kStreamOrdered ||
                         layout.endpoints == Layout::Endpoints::kStagedStreamOrdered;
    auto comm = Make<Communicator>("local", {{"timeout_s", ordered ? 15.0 : 60.0}});
    if (comm == nullptr) return absl::InternalError("local communicator not made");
    TESTBED_ASSIGN_OR_RETURN(auto endpoints, comm->Connect(world));
    if (layout.endpoints == Layout::Endpoints::kLocal) return endpoints;
    if (layout.endpoints == Layout::Endpoints::kStreamOrdered) return testing::StreamOrdered(std::move(endpoints));
    std::vector<std::unique_ptr<CommGroup>> wrapped;
    for (auto& e : endpoints) {
      auto memory = std::make_shared<testing::FakeDeviceMemory>();
      // Ordered below the device check: the emulation's own headers are host memory.
      if (layout.endpoints == Layout::Endpoints::kStagedStreamOrdered) {
        e = std::make_unique<testing::StreamOrderedGroup>(std::move(e));
      }
      auto device_only = std::make_unique<testing::DeviceOnlyGroup>(std::move(e), memory);
      if (layout.endpoints == Layout::Endpoints::kFakeDeviceOnly) {
        wrapped.push_back(std::move(device_only));
      } else {
        wrapped.push_back(MakeHostStaged(std::move(device_only), memory));
      }
    }
    return wrapped;
  }

  static absl::StatusOr<std::vector<StepRecord>> Run(const Layout& layout) {
    TESTBED_ASSIGN_OR_RETURN(ExecutionResult result, RunFull(layout));
    return result.steps;
  }

  // The whole result; `edit` may change the schedule before it runs.
  static absl::StatusOr<ExecutionResult> RunFull(const Layout& layout,
                                                 const std::function<void(Schedule&)>& edit = nullptr) {
    ModelShape shape;
    shape.name = "tiny";
    shape.layers = 4;
    shape.hidden = 32;
    shape.heads = 4;
    shape.seq_len = 16;
    shape.vocab = corpus_->vocab_size();
    shape.tied_embeddings = false;
    const ModelGraph graph = *BuildModelGraph(shape);
    const int world = layout.tp * layout.pp * layout.dp;
    const Cluster cluster = testing::StarCluster(world, 1e10, 1e-6);
    TrainSettings train;
    train.global_batch = 16;
    train.micro_batch = 2;
    train.steps = 3;
    train.optimizer = "adam";
    train.learning_rate = 3e-3;
    train.precision = Precision::kFp32;
    ParallelSettings parallel;
    parallel.tp = layout.tp;
    parallel.pp = layout.pp;
    parallel.dp = layout.dp;
    parallel.virtual_stages = layout.chunks;
    parallel.recompute = layout.recompute;
    auto dm = Make<DeviceModel>("roofline");
    auto part = Make<Partitioner>(layout.partitioner, layout.partitioner_params);
    auto sched = Make<Scheduler>(layout.scheduler, layout.scheduler_params);
    if (!dm || !part || !sched) return absl::InternalError("components not made");
    PlanningContext ctx{graph, cluster, train, parallel, *dm, 1, {}};
    TESTBED_ASSIGN_OR_RETURN(Plan plan, part->Partition(ctx));
    SchedulingContext sctx{graph, cluster, plan, train, *dm};
    TESTBED_ASSIGN_OR_RETURN(Schedule schedule, sched->BuildSchedule(sctx));
    if (edit) edit(schedule);
    TESTBED_ASSIGN_OR_RETURN(auto endpoints, Endpoints(layout, world));
    ExecutorInputs in{graph, plan, schedule, train, TextSource(*corpus_, shape.seq_len, 5), 5, {}, {}, {},
                      layout.make_gemm};
    return Execute(in, std::move(endpoints));
  }

  // The shipped digits sit beside the shipped corpus (data/text, data/digits).
  static std::string DigitsFile() {
    return (std::filesystem::path(TESTBED_TEST_CORPUS).parent_path().parent_path() / "digits" / "digits.csv.gz")
        .string();
  }

  // Every run of the experiment `text` on the real backend (written to a file of its own).
  static std::vector<absl::StatusOr<RunOutput>> RunReal(const std::string& name, const std::string& text) {
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / absl::StrCat("executor_test_", name, "_", ::getpid(), ".toml");
    std::ofstream(file) << text;
    std::vector<absl::StatusOr<RunOutput>> outs;
    auto ex = Experiment::Load(file, {});
    std::filesystem::remove(file);
    if (!ex.ok()) {
      outs.emplace_back(ex.status());
      return outs;
    }
    PresetLibrary presets({});
    RealBackend backend;
    for (const RunSpec& spec : ex->runs()) {
      auto run = ResolveRun(spec, *registry_, presets);
      if (!run.ok()) {
        outs.emplace_back(run.status());
        continue;
      }
      outs.push_back(backend.Run(*run, *registry_, RunControl{}));
    }
    return outs;
  }

  // A small cnn (one conv block of 4 channels on the 8x8 digits, then the classifier),
  // trained for kCnnSteps steps over `dp` replicas.
  static constexpr int kCnnSteps = 12;
  static absl::StatusOr<std::vector<StepRecord>> TrainCnnOnDigits(int dp) {
    TESTBED_ASSIGN_OR_RETURN(const train::LabeledData data, train::LoadDigits(DigitsFile()));
    ModelShape shape;
    shape.name = "cnn-digits";
    shape.family = "cnn";
    shape.channels = 1;
    shape.image_size = 8;
    shape.conv_channels = {4};
    shape.layers = 0;
    shape.vocab = data.classes;
    TESTBED_ASSIGN_OR_RETURN(const ModelGraph graph, BuildModelGraph(shape));
    const Cluster cluster = testing::StarCluster(dp, 1e10, 1e-6);
    TrainSettings train;
    train.global_batch = 32;
    train.micro_batch = 8;
    train.steps = kCnnSteps;
    train.optimizer = "adam";
    train.learning_rate = 5e-2;
    train.precision = Precision::kFp32;
    ParallelSettings parallel;
    parallel.dp = dp;
    auto dm = Make<DeviceModel>("roofline");
    auto part = Make<Partitioner>("megatron.uniform");
    auto sched = Make<Scheduler>("1f1b");
    if (!dm || !part || !sched) return absl::InternalError("components not made");
    PlanningContext ctx{graph, cluster, train, parallel, *dm, 1, {}};
    TESTBED_ASSIGN_OR_RETURN(Plan plan, part->Partition(ctx));
    SchedulingContext sctx{graph, cluster, plan, train, *dm};
    TESTBED_ASSIGN_OR_RETURN(Schedule schedule, sched->BuildSchedule(sctx));
    TESTBED_ASSIGN_OR_RETURN(auto endpoints, Endpoints(Layout{}, dp));
    ExecutorInputs in{graph, plan, schedule, train, LabeledSource(data, 5), 5, {}, {}, {}, {}};
    TESTBED_ASSIGN_OR_RETURN(ExecutionResult result, Execute(in, std::move(endpoints)));
    return result.steps;
  }

  static void ExpectSameAsSingle(const Layout& layout) {
    static const std::vector<StepRecord> single = Train(Layout{"single"});
    ASSERT_EQ(single.size(), 3u);
    const std::vector<StepRecord> run = Train(layout);
    ASSERT_EQ(run.size(), single.size()) << layout.name;
    for (size_t i = 0; i < run.size(); ++i) {
      EXPECT_NEAR(run[i].loss, single[i].loss, 2e-5) << layout.name << " step " << i;
      EXPECT_NEAR(run[i].grad_norm, single[i].grad_norm, 2e-4 * single[i].grad_norm) << layout.name << " step " << i;
    }
    // Training moved: the check is not comparing two untrained models.
    EXPECT_LT(single.back().loss, single.front().loss);
  }

  static Registry* registry_;
  static PluginLoader* loader_;
  static train::CharCorpus* corpus_;
};

Registry* ExecutorTest::registry_ = nullptr;
PluginLoader* ExecutorTest::loader_ = nullptr;
train::CharCorpus* ExecutorTest::corpus_ = nullptr;

TEST_F(ExecutorTest, DataParallel) { ExpectSameAsSingle({"dp4", 1, 1, 4}); }
TEST_F(ExecutorTest, TensorParallel) {
  ExpectSameAsSingle({"tp2", 2, 1, 1});
  ExpectSameAsSingle({"tp4", 4, 1, 1});
}
TEST_F(ExecutorTest, PipelineGPipe) { ExpectSameAsSingle({"pp2-gpipe", 1, 2, 1, 1, "megatron.uniform", {}, "gpipe"}); }
TEST_F(ExecutorTest, PipelineOneFOneB) { ExpectSameAsSingle({"pp4-1f1b", 1, 4, 1}); }
TEST_F(ExecutorTest, PipelineInterleaved) {
  ExpectSameAsSingle({"pp2-v2", 1, 2, 1, 2, "megatron.uniform", {}, "interleaved_1f1b"});
  // Megatron-Core's table in groups of 3 over 8 micro-batches: the gradients' transfers on
  // their own streams.
  ExpectSameAsSingle({"pp2-v2-groups-of-3", 1, 2, 1, 2, "megatron.uniform", {}, "interleaved_1f1b",
                      {{"microbatch_group", std::int64_t{3}}}});
}
TEST_F(ExecutorTest, ThreeDimensional) {
  ExpectSameAsSingle({"dp2-pp2", 1, 2, 2});
  ExpectSameAsSingle({"tp2-pp2", 2, 2, 1});
}
TEST_F(ExecutorTest, FullRecomputation) {
  Layout l{"pp2-recompute", 1, 2, 1};
  l.recompute = RecomputeMode::kFull;
  ExpectSameAsSingle(l);
}
TEST_F(ExecutorTest, SubPipelinedTensorParallelism) {
  ExpectSameAsSingle({"tp2-chunks2", 2, 1, 1, 1, "megatron.uniform", {}, "1f1b", {{"tp_chunks", std::int64_t{2}}}});
}
// Sub-pipelined tensor parallelism for real: each sub-batch's all-reduce is started, the
// other sub-batch's layer computes, and only then is the all-reduce waited for; without
// sub-batches every all-reduce is waited for by the very next task.
TEST_F(ExecutorTest, TensorParallelAllReducesOverlapTheOtherSubBatch) {
  auto chunked = RunFull({"tp2-chunks2", 2, 1, 1, 1, "megatron.uniform", {}, "1f1b", {{"tp_chunks", std::int64_t{2}}}});
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  auto blocking = RunFull({"tp2", 2, 1, 1});
  ASSERT_TRUE(blocking.ok()) << blocking.status();
  // 4 blocks x (attention + MLP) x (forward + backward) x 2 sub-batches x 2 ranks = 64
  // all-reduces; the first sub-batch's always overlaps the second's compute.
  EXPECT_GE(chunked->tensor_parallel_overlapped_per_step, 32);
  EXPECT_EQ(blocking->tensor_parallel_overlapped_per_step, 0);
  // The same bytes in both: the all-reduces are the schedule's, not the layers' own.
  EXPECT_DOUBLE_EQ(chunked->tensor_parallel_bytes_per_step, blocking->tensor_parallel_bytes_per_step);
  EXPECT_GT(blocking->tensor_parallel_bytes_per_step, 0);
}

// A task the executor has no handler for fails the run, naming it.
TEST_F(ExecutorTest, ATaskWithoutAHandlerIsAnErrorNamingIt) {
  auto r = RunFull({"dp2", 1, 1, 2}, [](Schedule& s) {
    Task copy;
    copy.kind = TaskKind::kCopy;
    copy.stream = streams::kHostCopy;
    copy.device = 1;
    copy.bytes = 64;
    copy.work = s.AddWork(CopyWork{true, -1});
    s.Add(copy);
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("no handler for a copy task on the host-copy stream"), std::string_view::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("copy 6.1e-05 MiB from host to device 1"), std::string_view::npos) << r.status();
}

TEST_F(ExecutorTest, MerakShiftedCriticalPath) {
  Layout l{"merak-pp4", 1, 4, 1, 1, "megatron.uniform", {}, "merak.shifted_critical_path"};
  l.recompute = RecomputeMode::kFull;
  ExpectSameAsSingle(l);
}
TEST_F(ExecutorTest, AutoPipeSubLayerStages) {
  ExpectSameAsSingle({"autopipe-pp4", 1, 4, 1, 1, "autopipe", {{"search", false}}, "1f1b"});
}

// Host buffers staged through (fake) device memory, as with nccl's host_buffers: pipeline
// sends and receives, tensor- and data-parallel all-reduces all go through the staging.
TEST_F(ExecutorTest, HostStagedDeviceCommunicator) {
  Layout l{"staged-dp2-tp2", 2, 1, 2};
  l.endpoints = Layout::Endpoints::kStagedFakeDevice;
  ExpectSameAsSingle(l);
  Layout p{"staged-pp2-dp2", 1, 2, 2};
  p.endpoints = Layout::Endpoints::kStagedFakeDevice;
  ExpectSameAsSingle(p);
}

// What the executor asks of a communicator is safe under NCCL's rules (one stream per
// communicator, rendezvous sends, pairing by posting order without tags): every schedule and
// layout finishes, and trains as single-process training does. A schedule whose sends and
// receives could wait on each other in a cycle would hang here (and fail at the deadline)
// instead of only on GPUs.
TEST_F(ExecutorTest, EveryScheduleRunsUnderNcclOrderingRules) {
  std::vector<Layout> layouts = {
      {"ordered-dp4", 1, 1, 4},
      {"ordered-tp2", 2, 1, 1},
      {"ordered-pp2-gpipe", 1, 2, 1, 1, "megatron.uniform", {}, "gpipe"},
      {"ordered-pp4-1f1b", 1, 4, 1},
      {"ordered-pp2-v2", 1, 2, 1, 2, "megatron.uniform", {}, "interleaved_1f1b"},
      {"ordered-dp2-pp2-v2", 1, 2, 2, 2, "megatron.uniform", {}, "interleaved_1f1b"},
      {"ordered-pp2-v2-groups-of-3", 1, 2, 1, 2, "megatron.uniform", {}, "interleaved_1f1b",
       {{"microbatch_group", std::int64_t{3}}}},
      {"ordered-dp2-pp2", 1, 2, 2},
      {"ordered-tp2-pp2", 2, 2, 1},
      {"ordered-tp2-chunks2", 2, 1, 1, 1, "megatron.uniform", {}, "1f1b", {{"tp_chunks", std::int64_t{2}}}},
      {"ordered-merak-pp4", 1, 4, 1, 1, "megatron.uniform", {}, "merak.shifted_critical_path"},
      {"ordered-autopipe-pp4", 1, 4, 1, 1, "autopipe", {{"search", false}}, "1f1b"},
  };
  layouts[10].recompute = RecomputeMode::kFull;
  for (Layout& l : layouts) {
    l.endpoints = Layout::Endpoints::kStreamOrdered;
    ExpectSameAsSingle(l);
  }
  // As the nccl communicator with host_buffers = true runs: staging above the ordered device.
  Layout staged{"ordered-staged-dp2-pp2", 1, 2, 2};
  staged.endpoints = Layout::Endpoints::kStagedStreamOrdered;
  ExpectSameAsSingle(staged);
}

TEST_F(ExecutorTest, DeviceMemoryEndpointsAreRefused) {
  Layout l{"device-only-dp2", 1, 1, 2};
  l.endpoints = Layout::Endpoints::kFakeDeviceOnly;
  absl::StatusOr<std::vector<StepRecord>> steps = Run(l);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(steps.status().message().find("host_buffers = true"), std::string_view::npos) << steps.status();
}

// A rank's layers run their products on the backend the executor gives its thread.
TEST_F(ExecutorTest, EveryRankUsesItsMatrixProductBackend) {
  std::array<std::atomic<int>, 4> calls{};
  Layout l{"tp2-dp2-counted", 2, 1, 2};
  l.make_gemm = [&calls](int rank) -> absl::StatusOr<std::unique_ptr<train::GemmBackend>> {
    return std::make_unique<CountingGemm>(calls[static_cast<size_t>(rank)]);
  };
  ExpectSameAsSingle(l);
  for (size_t r = 0; r < calls.size(); ++r) EXPECT_GT(calls[r].load(), 0) << "rank " << r;
}

TEST_F(ExecutorTest, MissingMatrixProductBackendIsOneClearError) {
  Layout l{"dp2-no-gpu", 1, 1, 2};
  l.make_gemm = [](int rank) -> absl::StatusOr<std::unique_ptr<train::GemmBackend>> {
    if (rank == 1) return absl::UnavailableError("no GPU for this rank");
    return std::make_unique<train::EigenGemm>();
  };
  absl::StatusOr<std::vector<StepRecord>> steps = Run(l);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(steps.status().message().find("rank 1: no GPU"), std::string_view::npos) << steps.status();
}

// On a GPU: cuBLAS products (FP32) train like Eigen's within float rounding.
TEST_F(ExecutorTest, CublasMatrixProducts) {
  const int gpus = train::CudaDeviceCount();
  if (gpus == 0) GTEST_SKIP() << "no usable GPU: cuBLAS training not tested";
  Layout l{"cublas-tp2-pp2", 2, 2, 1};
  l.make_gemm = [gpus](int rank) { return train::MakeCublasGemm(rank % gpus); };
  ExpectSameAsSingle(l);
}

// The measured collective latency the prediction of a real run uses.
TEST_F(ExecutorTest, AllReduceLatencyIsMeasuredOverEveryRank) {
  auto comm = Make<Communicator>("local", {{"timeout_s", 20.0}});
  ASSERT_NE(comm, nullptr);
  auto one = comm->Connect(1);
  ASSERT_TRUE(one.ok());
  auto solo = MeasureAllReduceLatency(*one, 5);
  ASSERT_TRUE(solo.ok()) << solo.status();
  EXPECT_EQ(*solo, 0.0);  // nothing to wait for
  auto three = comm->Connect(3);
  ASSERT_TRUE(three.ok());
  auto t = MeasureAllReduceLatency(*three, 5);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(*t, 0.0);
  // The endpoints are still usable afterwards (the executor runs on them next).
  testing::OnEveryRank(*three, [](CommGroup& g) {
    float x = static_cast<float>(g.rank());
    EXPECT_TRUE(g.AllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum).ok());
    EXPECT_EQ(x, 3.0f);
  });
}

// On GPUs: the nccl communicator with host buffers, one rank per GPU.
TEST_F(ExecutorTest, NcclHostBuffers) {
  Layout l{"nccl-dp2", 1, 1, 2};
  l.endpoints = Layout::Endpoints::kNcclHostBuffers;
  absl::StatusOr<std::vector<StepRecord>> probe = Run(Layout{"nccl-probe", 1, 1, 1, 1, "megatron.uniform", {}, "1f1b",
                                                             {}, RecomputeMode::kNone,
                                                             Layout::Endpoints::kNcclHostBuffers});
  if (!probe.ok() && (probe.status().code() == absl::StatusCode::kUnavailable)) {
    GTEST_SKIP() << "nccl communicator not usable here: " << probe.status();
  }
  ASSERT_TRUE(probe.ok()) << probe.status();
  absl::StatusOr<std::vector<StepRecord>> two = Run(l);
  if (!two.ok() && two.status().code() == absl::StatusCode::kInvalidArgument) {
    GTEST_SKIP() << "needs 2 GPUs: " << two.status();
  }
  ExpectSameAsSingle(l);
}

// The cnn family for real: data-parallel training over 2 replicas gives single-process
// training's losses and gradient norms, and the loss falls.
TEST_F(ExecutorTest, CnnDataParallelMatchesSingleProcess) {
  auto single = TrainCnnOnDigits(1);
  ASSERT_TRUE(single.ok()) << single.status();
  auto dp2 = TrainCnnOnDigits(2);
  ASSERT_TRUE(dp2.ok()) << dp2.status();
  ASSERT_EQ(single->size(), static_cast<size_t>(kCnnSteps));
  ASSERT_EQ(dp2->size(), single->size());
  for (size_t i = 0; i < single->size(); ++i) {
    EXPECT_NEAR((*dp2)[i].loss, (*single)[i].loss, 2e-5) << "step " << i;
    EXPECT_NEAR((*dp2)[i].grad_norm, (*single)[i].grad_norm, 2e-4 * (*single)[i].grad_norm) << "step " << i;
  }
  EXPECT_LT(single->back().loss, 0.6 * single->front().loss);  // 2.37 to 0.80 nats/sample
}

// The executor's cnn has the graph's layers and parameters, and runs data parallel only.
TEST_F(ExecutorTest, CnnStackMatchesItsGraphAndRefusesModelSplits) {
  ModelShape shape;
  shape.family = "cnn";
  shape.channels = 1;
  shape.image_size = 8;
  shape.conv_channels = {4, 6};
  shape.layers = 1;
  shape.hidden = 12;
  shape.vocab = 10;
  auto graph = BuildModelGraph(shape);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto model = BuildExecutorStack(*graph, 3);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->num_layers(), static_cast<int>(graph->layers.size()));
  for (int l = 0; l < model->num_layers(); ++l) {
    const Layer& gl = graph->layers[static_cast<size_t>(l)];
    std::int64_t params = 0;
    for (train::Param<float>* p : model->layer(l).Params()) params += p->value.size();
    EXPECT_EQ(params, gl.params) << gl.name;
    // The graph's FLOPs are 2 x the convolution's multiply-accumulates as the layer counts them.
    if (const auto* block = dynamic_cast<const ConvBlock*>(&model->layer(l))) {
      EXPECT_EQ(gl.kind, LayerKind::kConv);
      EXPECT_DOUBLE_EQ(gl.fwd_flops_per_sample, 2.0 * static_cast<double>(block->conv().MacsPerSample())) << gl.name;
    }
  }
  EXPECT_EQ(graph->layers[0].name, "conv0");
  EXPECT_EQ(graph->layers[1].name, "conv1");
  EXPECT_TRUE(CheckExecutorLayout(graph->shape, 1, 1).ok());
  EXPECT_NE(CheckExecutorLayout(graph->shape, 2, 1).message().find("a cnn runs without tensor parallelism"),
            std::string_view::npos);
  EXPECT_NE(CheckExecutorLayout(graph->shape, 1, 2).message().find("one pipeline stage (pp = 1)"),
            std::string_view::npos);
}

double MetricOf(const RunOutput& out, const char* name) {
  const Metric* m = out.metrics.Find(name);
  return m != nullptr ? m->value : -1.0;
}

// An experiment training a cnn on the real backend: `model` and `data` are inline tables.
std::string CnnExperiment(const std::string& model, const std::string& data, int steps) {
  return absl::StrCat(R"(communicator = "local"
[experiment]
name = "cnn"
backend = "real"
[[arm]]
name = "cnn"
[parallel]
dp = 2
[train]
global_batch = 32
micro_batch = 8
steps = )", steps, R"(
optimizer = "adam"
learning_rate = 0.03
precision = "fp32"
[real]
profile_repeats = 1
[model]
name = "cnn"
family = "cnn"
vocab = 10
)", model, "\n[data]\n", data, "\n");
}

// Through the real backend: the digits as 8x8 images, two replicas checked against one, the
// layers profiled for the simulator's prediction, a validation accuracy.
TEST_F(ExecutorTest, RealBackendTrainsACnnOnTheDigits) {
  const std::string text =
      CnnExperiment("channels = 1\nimage_size = 8\nconv_channels = [4]\nlayers = 1\nhidden = 16",
                    absl::StrCat("dataset = \"digits\"\npath = \"", DigitsFile(), "\"\nmax_samples = 600"), 8);
  auto outs = RunReal("cnn_digits", text);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_LT(MetricOf(*outs[0], "final_loss"), MetricOf(*outs[0], "first_loss"));
  EXPECT_GE(MetricOf(*outs[0], "max_loss_diff_vs_single"), 0.0);
  EXPECT_LT(MetricOf(*outs[0], "max_loss_diff_vs_single"), 2e-5);
  EXPECT_GT(MetricOf(*outs[0], "validation_accuracy"), 0.0);
  EXPECT_GT(MetricOf(*outs[0], "predicted_iteration_s"), 0.0);
}

// Images and model must agree; Fashion-MNIST without its files names the directory and the
// package that installs them.
TEST_F(ExecutorTest, RealBackendNamesImageAndDataMismatches) {
  auto wrong_size = RunReal("cnn_wrong_size", CnnExperiment("image_size = 28\nconv_channels = [4]\nlayers = 0",
                                                            absl::StrCat("dataset = \"digits\"\npath = \"",
                                                                         DigitsFile(), "\""), 2));
  ASSERT_EQ(wrong_size.size(), 1u);
  ASSERT_FALSE(wrong_size[0].ok());
  EXPECT_NE(wrong_size[0].status().message().find(
                "[model] channels = 1, image_size = 28 do not fit [data] dataset \"digits\", whose images have 1 "
                "channel of 8x8 pixels"),
            std::string_view::npos)
      << wrong_size[0].status();
  const std::string missing = (std::filesystem::temp_directory_path() / "no-fashion-mnist-here").string();
  auto no_files = RunReal("cnn_no_files", CnnExperiment("image_size = 28\nconv_channels = [4]\nlayers = 0",
                                                        absl::StrCat("dataset = \"fashion-mnist\"\npath = \"",
                                                                     missing, "\""), 2));
  ASSERT_EQ(no_files.size(), 1u);
  ASSERT_FALSE(no_files[0].ok());
  EXPECT_EQ(no_files[0].status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_files[0].status().message().find(absl::StrCat("no directory '", missing, "'")), std::string_view::npos)
      << no_files[0].status();
  EXPECT_NE(no_files[0].status().message().find("Debian package dataset-fashion-mnist"), std::string_view::npos)
      << no_files[0].status();
}

// The Fashion-MNIST branch on IDX files of its layout made here (plain bytes under the .gz
// names, which the loader reads as they are): 60 images of 28x28, class c a bright row 2c,
// of which the first 48 are used.
TEST_F(ExecutorTest, RealBackendReadsFashionMnistFilesFromItsPath) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("executor_test_idx_", ::getpid());
  std::filesystem::create_directories(dir);
  auto be32 = [](std::uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  constexpr int kImages = 60;
  std::string images = be32(0x803) + be32(kImages) + be32(28) + be32(28), labels = be32(0x801) + be32(kImages);
  for (int i = 0; i < kImages; ++i) {
    const int c = i % 10;
    for (int p = 0; p < 28 * 28; ++p) images.push_back(static_cast<char>(p / 28 == 2 * c ? 255 : (p * 7 + i) % 32));
    labels.push_back(static_cast<char>(c));
  }
  std::ofstream(dir / "train-images-idx3-ubyte.gz", std::ios::binary) << images;
  std::ofstream(dir / "train-labels-idx1-ubyte.gz", std::ios::binary) << labels;
  auto outs = RunReal("cnn_idx", CnnExperiment("image_size = 28\nconv_channels = [2]\nlayers = 0",
                                               absl::StrCat("dataset = \"fashion-mnist\"\npath = \"", dir.string(),
                                                            "\"\nmax_samples = 48\nvalidation_fraction = 0.25"),
                                               3));
  std::filesystem::remove_all(dir);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_LT(MetricOf(*outs[0], "max_loss_diff_vs_single"), 2e-5);
  EXPECT_GE(MetricOf(*outs[0], "validation_accuracy"), 0.0);
}

// Fashion-MNIST from Debian's package (skipped where it is not installed): a cnn on the first
// 512 training images learns.
TEST_F(ExecutorTest, RealBackendTrainsACnnOnFashionMnist) {
  constexpr char kDir[] = "/usr/share/datasets/fashion-mnist";
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    if (!std::filesystem::exists(std::filesystem::path(kDir) / name)) {
      GTEST_SKIP() << "Fashion-MNIST not installed (" << kDir << "/" << name
                   << " is absent): install the Debian package dataset-fashion-mnist";
    }
  }
  auto outs = RunReal("cnn_fashion", CnnExperiment("channels = 1\nimage_size = 28\nconv_channels = [4]\nlayers = 0",
                                                   "dataset = \"fashion-mnist\"\nmax_samples = 512", 8));
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_LT(MetricOf(*outs[0], "final_loss"), MetricOf(*outs[0], "first_loss"));
  EXPECT_LT(MetricOf(*outs[0], "max_loss_diff_vs_single"), 2e-5);
}

}  // namespace
}  // namespace testbed::exec
