// Every schedule and parallel layout, run for real on ranks (threads), reproduces
// single-process training: the same loss and gradient norm at every step (float rounding
// aside: partial sums add up in another order).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <functional>

#include "engine/plugin_loader.h"
#include "exec/collective_latency.h"
#include "exec/data_sources.h"
#include "exec/executor.h"
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
    const ComponentEntry* e = registry_->Find(T::kKind, name);
    EXPECT_NE(e, nullptr) << "component " << name << " not loaded";
    if (e == nullptr) return nullptr;
    ParamSet p;
    for (const ParamSpec& s : e->decl.params) p.Set(s.name(), s.default_value());
    for (const auto& [k, v] : set) p.Set(k, v);
    auto made = registry_->Create<T>(name, p);
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
      {"ordered-dp2-pp2", 1, 2, 2},
      {"ordered-tp2-pp2", 2, 2, 1},
      {"ordered-tp2-chunks2", 2, 1, 1, 1, "megatron.uniform", {}, "1f1b", {{"tp_chunks", std::int64_t{2}}}},
      {"ordered-merak-pp4", 1, 4, 1, 1, "megatron.uniform", {}, "merak.shifted_critical_path"},
      {"ordered-autopipe-pp4", 1, 4, 1, 1, "autopipe", {{"search", false}}, "1f1b"},
  };
  layouts[9].recompute = RecomputeMode::kFull;
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

}  // namespace
}  // namespace testbed::exec
