#include "exec/executor.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "exec/gpt_stack.h"
#include "exec/mlp_stack.h"
#include "testbed/status_macros.h"
#include "testbed/train/adam.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/rng.h"
#include "testbed/train/sgd.h"

namespace testbed::exec {
namespace {

using Clock = std::chrono::steady_clock;
using train::Matrix;


class RankRunner {
 public:
  RankRunner(const ExecutorInputs& in, CommGroup& world) : in_(in), world_(world), plan_(in.plan) {}

  absl::Status Setup() {
    rank_ = world_.rank();
    const auto grid = plan_.Uniform();
    if (!grid) {
      return absl::UnimplementedError("real execution runs plans whose stages all have the same tensor-parallel degree, "
                                      "replica count and micro-batches per replica");
    }
    tp_ = grid->tp;
    pp_ = grid->pp;
    dp_ = grid->dp;
    mbs_ = grid->micro_batches;
    chunks_ = plan_.virtual_stages();
    if (world_.size() != plan_.num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat("the plan needs ", plan_.num_devices(), " ranks; the world has ",
                                                     world_.size()));
    }
    bool found = false;
    for (int d = 0; d < dp_ && !found; ++d) {
      for (int s = 0; s < pp_ && !found; ++s) {
        for (int t = 0; t < tp_ && !found; ++t) {
          if (plan_.DeviceOf(d, s, t) == rank_) {
            dp_rank_ = d;
            stage_ = s;
            tp_rank_ = t;
            found = true;
          }
        }
      }
    }
    if (!found) return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, " has no place in the plan"));
    // Sub-groups: every group of the schedule this rank belongs to, created in index order
    // by all its members.
    const auto& groups = in_.schedule.groups();
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& members = groups[g];
      if (members.size() < 2 || std::find(members.begin(), members.end(), rank_) == members.end()) continue;
      std::vector<int> ranks(members.begin(), members.end());
      TESTBED_ASSIGN_OR_RETURN(groups_[static_cast<std::int32_t>(g)], world_.NewGroup(ranks));
    }
    CommGroup* tp_group = nullptr;
    if (tp_ > 1) {
      std::vector<DeviceId> tp_members;
      for (int t = 0; t < tp_; ++t) tp_members.push_back(plan_.DeviceOf(dp_rank_, stage_, t));
      for (size_t g = 0; g < groups.size(); ++g) {
        if (groups[g] == tp_members) tp_group = groups_[static_cast<std::int32_t>(g)].get();
      }
      if (tp_group == nullptr) {
        std::vector<int> ranks(tp_members.begin(), tp_members.end());
        TESTBED_ASSIGN_OR_RETURN(own_tp_group_, world_.NewGroup(ranks));
        tp_group = own_tp_group_.get();
      }
    }
    // Pipeline traffic on duplicates of the world group, one per direction, like the
    // simulator's separate send and receive streams. Where a communicator runs a rank's sends
    // and receives one at a time in posting order and a send waits for its receive (NCCL, on
    // one stream per communicator), traffic on one group must flow one way along the stages:
    // then a wait can only lead further down the chain, never back. So a gradient going back
    // never waits behind an activation going forward, and with interleaved stages the
    // activations and gradients that wrap around between the last stage and the first (the
    // next model chunk) have groups of their own. tests/exec checks every schedule under
    // these rules (tests/comm/stream_ordered_group.h).
    if (pp_ > 1) {
      std::vector<int> everyone(static_cast<size_t>(world_.size()));
      for (int r = 0; r < world_.size(); ++r) everyone[static_cast<size_t>(r)] = r;
      const int groups = chunks_ > 1 ? 4 : 2;
      for (int g = 0; g < groups; ++g) {
        TESTBED_ASSIGN_OR_RETURN(p2p_[static_cast<size_t>(g)], world_.NewGroup(everyone));
      }
    }
    train::SequentialModel<float> full;
    if (in_.model.shape.family == "mlp") {
      if (tp_ > 1) return absl::InvalidArgumentError("an mlp runs without tensor parallelism");
      TESTBED_ASSIGN_OR_RETURN(full, BuildMlpStack(in_.model, in_.seed));
    } else {
      TESTBED_ASSIGN_OR_RETURN(full, BuildGptStack(in_.model, in_.seed));
    }
    AllReduceFn<float> reduce = nullptr;
    if (tp_group != nullptr) {
      reduce = [this, tp_group](Matrix<float>& m) {
        tp_bytes_ += static_cast<double>(m.size()) * sizeof(float);
        return tp_group->AllReduce(std::span<float>(m.data(), static_cast<size_t>(m.size())), ReduceOp::kSum);
      };
    }
    model_ = ShardGptStack(full, tp_rank_, tp_, reduce);
    for (int c = 0; c < chunks_; ++c) {
      const StageSpec& st = plan_.Chunk(stage_, c);
      for (int l = st.first_layer; l < st.end_layer; ++l) {
        for (train::Param<float>* p : model_.layer(l).Params()) params_.push_back(p);
      }
    }
    if (in_.train.optimizer == "adam") {
      train::AdamOptions o;
      o.learning_rate = in_.train.learning_rate;
      optimizer_ = std::make_unique<train::Adam<float>>(o);
    } else {
      optimizer_ = std::make_unique<train::Sgd<float>>(train::SgdOptions{in_.train.learning_rate, 0.9, 0.0});
    }
    TESTBED_ASSIGN_OR_RETURN(const std::vector<TaskId> order, in_.schedule.ExecutionOrder());
    for (TaskId id : order) {
      for (DeviceId d : in_.schedule.DevicesOf(id)) {
        if (d == rank_) {
          tasks_.push_back(id);
          break;
        }
      }
    }
    hidden_ = in_.model.shape.hidden;
    return absl::OkStatus();
  }

  // Loss and accuracy of the whole model on held-out data (rank 0, unsplit models only).
  absl::Status Evaluate(ExecutionResult& out) {
    if (!in_.validation || rank_ != 0 || tp_ != 1 || pp_ != 1) return absl::OkStatus();
    TESTBED_ASSIGN_OR_RETURN(Batch b, in_.validation());
    std::vector<train::LayerCache<float>> caches;
    TESTBED_ASSIGN_OR_RETURN(Matrix<float> logits, model_.Forward(b.inputs, caches));
    TESTBED_ASSIGN_OR_RETURN(auto lg, train::SoftmaxCrossEntropy<float>(logits, b.targets));
    out.validation_loss = lg.loss;
    out.validation_accuracy = train::Accuracy<float>(logits, b.targets);
    return absl::OkStatus();
  }

  absl::StatusOr<StepRecord> Step(std::int64_t step, std::vector<TaskTime>* times) {
    const std::int64_t global = plan_.micro_batch * mbs_ * dp_;
    TESTBED_ASSIGN_OR_RETURN(data_, in_.data(step, global));
    seq_ = data_.rows_per_sample;
    loss_local_ = 0;
    grad_sq_local_ = 0;
    pp_bytes_ = dp_bytes_ = tp_bytes_ = encode_s_ = decode_s_ = comp_dense_ = comp_wire_ = 0;
    sub_runs_.clear();
    const auto t0 = Clock::now();
    for (TaskId id : tasks_) {
      const auto ts = Clock::now();
      absl::Status st = Run(id);
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat(in_.schedule.Describe(id), ": ", st.message()));
      if (times != nullptr) {
        times->push_back(TaskTime{id, rank_, std::chrono::duration<double>(ts - t0).count(),
                                  std::chrono::duration<double>(Clock::now() - t0).count()});
      }
    }
    for (auto& [req, buffer] : pending_sends_) TESTBED_RETURN_IF_ERROR(req->Wait());
    pending_sends_.clear();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    // Loss, gradient norm and traffic over the world; the slowest rank's time.
    double sums[9] = {loss_local_, grad_sq_local_, pp_bytes_,    dp_bytes_,   tp_bytes_,
                      encode_s_,   decode_s_,      comp_dense_, comp_wire_};
    TESTBED_RETURN_IF_ERROR(world_.AllReduce(sums, sums, 9, DataType::kFloat64, ReduceOp::kSum));
    double slowest = wall;
    TESTBED_RETURN_IF_ERROR(world_.AllReduce(&slowest, &slowest, 1, DataType::kFloat64, ReduceOp::kMax));
    traffic_[0] = sums[2];
    traffic_[1] = sums[3];
    traffic_[2] = sums[4];
    traffic_[3] = sums[5] / world_.size();
    traffic_[4] = sums[6] / world_.size();
    traffic_[5] = sums[7];
    traffic_[6] = sums[8];
    return StepRecord{sums[0], std::sqrt(sums[1]), slowest};
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] const double* traffic() const noexcept { return traffic_; }

 private:
  using Key = std::pair<int, int>;  // (chunk or layer, micro-batch)

  [[nodiscard]] std::int64_t Rows() const { return plan_.micro_batch * seq_; }
  // Rows of the global batch belonging to micro-batch `mb` of this rank's replica.
  [[nodiscard]] std::int64_t FirstSample(int mb) const {
    return (static_cast<std::int64_t>(dp_rank_) * mbs_ + mb) * plan_.micro_batch;
  }
  [[nodiscard]] std::vector<std::int64_t> Slice(const std::vector<std::int64_t>& v, int mb) const {
    const auto begin = v.begin() + FirstSample(mb) * seq_;
    return std::vector<std::int64_t>(begin, begin + Rows());
  }
  [[nodiscard]] Matrix<float> SliceRows(const Matrix<float>& m, int mb) const {
    return m.middleRows(FirstSample(mb) * seq_, Rows());
  }
  [[nodiscard]] int Tag(int receiver_chunk, int mb, bool backward) const {
    const int chunks = pp_ * chunks_;
    return static_cast<int>((static_cast<std::int64_t>(mb) * (chunks + 1) * 2 + receiver_chunk * 2 + (backward ? 1 : 0)) %
                            (CommGroup::kMaxTag + 1));
  }

  absl::Status Run(TaskId id) {
    const Task& t = in_.schedule.task(id);
    switch (t.kind) {
      case TaskKind::kCompute:
        return Compute(t);
      case TaskKind::kSend:
        return Send(t);
      case TaskKind::kRecv:
        return Recv(t);
      case TaskKind::kCollective:
        return Collective(t);
      case TaskKind::kKernel:
        // Compression kernels of a simulated schedule run inside the gradient exchange here.
        return in_.schedule.kernel(id).op == KernelOp::kOptimizerStep ? OptimizerStep() : absl::OkStatus();
      case TaskKind::kCopy:
        return absl::UnimplementedError("the executor has no host-to-device copy (its tensors live in host memory)");
    }
    return absl::OkStatus();
  }

  absl::Status Compute(const Task& t) {
    if (t.fraction < 1.0f) {
      // Sub-batches (sub-pipelined tensor parallelism) are a timing device: the layer runs
      // once on the whole micro-batch, at its first part; sliced micro-batches are not run.
      auto key = std::tuple(t.first_layer, t.micro_batch, static_cast<int>(t.phase));
      if (sub_runs_.count(key)) return absl::OkStatus();
      sub_runs_.insert(key);
    }
    const StageSpec& st = plan_.Chunk(stage_, t.chunk);
    const Key ck{t.chunk, t.micro_batch};
    const int last_layer = static_cast<int>(in_.model.layers.size());
    switch (t.phase) {
      case Phase::kForward: {
        Matrix<float> x;
        if (t.first_layer == st.first_layer) {
          if (t.first_layer == 0) {
            x = SliceRows(data_.inputs, t.micro_batch);
          } else {
            TESTBED_ASSIGN_OR_RETURN(x, TakeReceived(ck, /*backward=*/false));
          }
        } else {
          x = std::move(act_[ck]);
        }
        if (t.checkpoint) ckpt_[{t.first_layer, t.micro_batch}] = x;
        for (int l = t.first_layer; l < t.end_layer; ++l) {
          TESTBED_ASSIGN_OR_RETURN(x, model_.layer(l).Forward(x, cache_[{l, t.micro_batch}]));
          if (t.checkpoint) cache_.erase({l, t.micro_batch});
        }
        if (t.end_layer == last_layer) {
          const double normalizer = static_cast<double>(plan_.micro_batch * mbs_ * dp_ * seq_);
          TESTBED_ASSIGN_OR_RETURN(auto lg, train::SoftmaxCrossEntropy<float>(
                                                x, Slice(data_.targets, t.micro_batch), normalizer));
          // Every tensor-parallel rank computes the same loss; count it once.
          if (tp_rank_ == 0) loss_local_ += lg.loss;
          grad_[ck] = std::move(lg.dlogits);
        } else {
          act_[ck] = std::move(x);
        }
        return absl::OkStatus();
      }
      case Phase::kRecompute: {
        auto it = ckpt_.find({t.first_layer, t.micro_batch});
        if (it == ckpt_.end()) return absl::InternalError("recompute without a checkpoint");
        Matrix<float> x = it->second;
        for (int l = t.first_layer; l < t.end_layer; ++l) {
          TESTBED_ASSIGN_OR_RETURN(x, model_.layer(l).Forward(x, cache_[{l, t.micro_batch}]));
        }
        return absl::OkStatus();
      }
      case Phase::kBackward: {
        Matrix<float> dy;
        if (t.end_layer == st.end_layer && t.end_layer != last_layer) {
          TESTBED_ASSIGN_OR_RETURN(dy, TakeReceived(ck, /*backward=*/true));
        } else {
          dy = std::move(grad_[ck]);
        }
        for (int l = t.end_layer - 1; l >= t.first_layer; --l) {
          auto it = cache_.find({l, t.micro_batch});
          if (it == cache_.end()) return absl::InternalError(absl::StrCat("no saved activations for layer ", l));
          TESTBED_ASSIGN_OR_RETURN(dy, model_.layer(l).Backward(dy, it->second));
          cache_.erase(it);
          ckpt_.erase({l, t.micro_batch});
        }
        grad_[ck] = std::move(dy);
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

  // The activation (or, backward, the gradient) received for `ck`, taken out of the inbox.
  absl::StatusOr<Matrix<float>> TakeReceived(const Key& ck, bool backward) {
    auto it = inbox_.find({ck, backward});
    if (it == inbox_.end()) {
      return absl::InternalError(backward ? "backward before its gradient arrived"
                                          : "forward before its activation arrived");
    }
    Matrix<float> m = std::move(it->second);
    inbox_.erase(it);
    return m;
  }

  [[nodiscard]] CommGroup& PipelineGroup(bool backward, bool wraps) const {
    return *p2p_[static_cast<size_t>((backward ? 1 : 0) + (wraps ? 2 : 0))];
  }

  absl::Status Send(const Task& t) {
    const Key ck{t.chunk, t.micro_batch};
    const bool backward = t.phase == Phase::kBackward;
    auto buffer = std::make_unique<Matrix<float>>(backward ? grad_[ck] : act_[ck]);
    const int own = t.chunk * pp_ + stage_;
    const int receiver = backward ? own - 1 : own + 1;
    pp_bytes_ += static_cast<double>(buffer->size()) * sizeof(float);
    // Forward out of the last stage, or backward out of the first, goes round to the other end.
    const bool wraps = backward ? stage_ == 0 : stage_ == pp_ - 1;
    CommGroup& direction = PipelineGroup(backward, wraps);
    TESTBED_ASSIGN_OR_RETURN(CommRequestPtr req, direction.ISend(buffer->data(), buffer->size(), DataType::kFloat32,
                                                              t.peer, Tag(receiver, t.micro_batch, backward)));
    pending_sends_.emplace_back(std::move(req), std::move(buffer));
    return absl::OkStatus();
  }

  absl::Status Recv(const Task& t) {
    const bool backward = t.phase == Phase::kBackward;
    Matrix<float> buffer(Rows(), hidden_);
    const int own = t.chunk * pp_ + stage_;
    // Forward into the first stage, or backward into the last, came round from the other end.
    const bool wraps = backward ? stage_ == pp_ - 1 : stage_ == 0;
    CommGroup& direction = PipelineGroup(backward, wraps);
    TESTBED_RETURN_IF_ERROR(direction.Recv(buffer.data(), buffer.size(), DataType::kFloat32, t.peer,
                                        Tag(own, t.micro_batch, backward)));
    inbox_[{{t.chunk, t.micro_batch}, backward}] = std::move(buffer);
    return absl::OkStatus();
  }

  // Data-parallel gradient exchange of the task's layers; other collectives (tensor-parallel,
  // already done inside the layers) have nothing to do here.
  absl::Status Collective(const Task& t) {
    if (t.stream != streams::kDataComm || t.op != CollectiveOp::kAllReduce) return absl::OkStatus();
    auto g = groups_.find(t.group);
    if (g == groups_.end()) return absl::OkStatus();
    // The bucket's plain gradients in one all-reduce; compressed tensors each on their own
    // (a compressor works on one tensor at a time and keeps its state per tensor).
    std::vector<train::Param<float>*> plain;
    for (int l = t.first_layer; l < t.end_layer; ++l) {
      if (!HoldsLayer(l)) continue;
      const bool compress = in_.make_compressor && (!in_.compress_layer || in_.compress_layer(l));
      for (train::Param<float>* p : model_.layer(l).Params()) {
        if (!compress) {
          plain.push_back(p);
          continue;
        }
        std::vector<float> flat(p->grad.data(), p->grad.data() + p->grad.size());
        TESTBED_RETURN_IF_ERROR(Compressed(*g->second, p->name, flat));
        std::copy(flat.begin(), flat.end(), p->grad.data());
      }
    }
    std::vector<float> flat;
    for (train::Param<float>* p : plain) flat.insert(flat.end(), p->grad.data(), p->grad.data() + p->grad.size());
    if (flat.empty()) return absl::OkStatus();
    dp_bytes_ += static_cast<double>(flat.size()) * sizeof(float);
    TESTBED_RETURN_IF_ERROR(g->second->AllReduce(std::span<float>(flat), ReduceOp::kSum));
    size_t offset = 0;
    for (train::Param<float>* p : plain) {
      std::copy(flat.begin() + static_cast<std::ptrdiff_t>(offset),
                flat.begin() + static_cast<std::ptrdiff_t>(offset + static_cast<size_t>(p->grad.size())), p->grad.data());
      offset += static_cast<size_t>(p->grad.size());
    }
    return absl::OkStatus();
  }

  [[nodiscard]] bool HoldsLayer(int l) const {
    for (int c = 0; c < chunks_; ++c) {
      const StageSpec& st = plan_.Chunk(stage_, c);
      if (l >= st.first_layer && l < st.end_layer) return true;
    }
    return false;
  }

  // Sums one tensor's gradient `flat` over the data-parallel group through the compressor:
  // mergeable payloads part by part with an all-reduce, others whole by all-gather.
  absl::Status Compressed(CommGroup& group, const std::string& tensor, std::vector<float>& flat) {
    auto& comp = compressors_[tensor];
    if (comp == nullptr) {
      TESTBED_ASSIGN_OR_RETURN(comp, in_.make_compressor());
    }
    EncodeContext ctx;
    ctx.rank = group.rank();
    ctx.step = step_counter_;
    DecodeOptions opt;
    opt.ranks = group.size();
    opt.average = false;
    auto timed = [this](double& total, auto&& f) {
      const auto t0 = Clock::now();
      auto r = f();
      total += std::chrono::duration<double>(Clock::now() - t0).count();
      return r;
    };
    TESTBED_ASSIGN_OR_RETURN(Payload payload, timed(encode_s_, [&] { return comp->Encode(flat, ctx); }));
    comp_dense_ += static_cast<double>(flat.size()) * sizeof(float);
    comp_wire_ += static_cast<double>(payload.bytes());
    if (comp->mergeable()) {
      for (PayloadPart& part : payload.parts) {
        dp_bytes_ += static_cast<double>(part.bytes());
        TESTBED_RETURN_IF_ERROR(group.AllReduce(part.raw(), part.raw(), part.elements, part.type, part.op));
      }
      std::vector<Payload> one;
      one.push_back(std::move(payload));
      return timed(decode_s_, [&] { return comp->Decode(one, opt, flat); });
    }
    // Whole payloads by all-gather: sizes first, then each part's bytes.
    std::vector<Payload> all(static_cast<size_t>(group.size()));
    for (size_t p = 0; p < payload.parts.size(); ++p) {
      PayloadPart& part = payload.parts[p];
      std::int64_t mine = part.elements;
      std::vector<std::int64_t> counts(static_cast<size_t>(group.size()));
      TESTBED_RETURN_IF_ERROR(group.AllGather(&mine, counts.data(), 1, DataType::kInt64));
      std::int64_t total = 0;
      for (std::int64_t c : counts) total += c;
      const size_t elem = DataTypeSize(part.type);
      std::vector<std::byte> gathered(static_cast<size_t>(total) * elem);
      dp_bytes_ += static_cast<double>(part.bytes());
      TESTBED_RETURN_IF_ERROR(group.AllGatherV(part.raw(), gathered.data(), counts, part.type));
      std::int64_t offset = 0;
      for (int r = 0; r < group.size(); ++r) {
        PayloadPart copy;
        copy.name = part.name;
        copy.type = part.type;
        copy.op = part.op;
        copy.elements = counts[static_cast<size_t>(r)];
        copy.data.assign(gathered.begin() + static_cast<std::ptrdiff_t>(offset * static_cast<std::int64_t>(elem)),
                         gathered.begin() + static_cast<std::ptrdiff_t>((offset + copy.elements) * static_cast<std::int64_t>(elem)));
        offset += copy.elements;
        all[static_cast<size_t>(r)].parts.push_back(std::move(copy));
      }
    }
    return timed(decode_s_, [&] { return comp->Decode(all, opt, flat); });
  }

  absl::Status OptimizerStep() {
    // The gradient norm counts each element once: sharded parameters on every tensor rank,
    // replicated ones on rank 0 only, and one data-parallel replica.
    if (dp_rank_ == 0) {
      for (train::Param<float>* p : params_) {
        if (tp_rank_ == 0 || ParamIsSharded(p->name)) grad_sq_local_ += static_cast<double>(p->grad.squaredNorm());
      }
    }
    optimizer_->Step(params_);
    for (train::Param<float>* p : params_) p->ZeroGrad();
    ++step_counter_;
    return absl::OkStatus();
  }

  const ExecutorInputs& in_;
  CommGroup& world_;
  const Plan& plan_;
  int rank_ = 0, dp_rank_ = 0, stage_ = 0, tp_rank_ = 0;
  int tp_ = 1, pp_ = 1, dp_ = 1, chunks_ = 1;
  std::int64_t mbs_ = 1;
  std::int64_t seq_ = 0, hidden_ = 0;
  std::map<std::int32_t, std::unique_ptr<CommGroup>> groups_;
  std::unique_ptr<CommGroup> own_tp_group_;
  // Pipeline traffic: forward, backward, forward wrapping round, backward wrapping round.
  std::array<std::unique_ptr<CommGroup>, 4> p2p_;
  train::SequentialModel<float> model_;
  std::vector<train::Param<float>*> params_;
  std::unique_ptr<train::Optimizer<float>> optimizer_;
  std::vector<TaskId> tasks_;
  Batch data_;
  std::map<Key, Matrix<float>> act_, grad_, ckpt_;
  std::map<Key, train::LayerCache<float>> cache_;
  std::map<std::pair<Key, bool>, Matrix<float>> inbox_;
  std::vector<std::pair<CommRequestPtr, std::unique_ptr<Matrix<float>>>> pending_sends_;
  std::set<std::tuple<int, int, int>> sub_runs_;
  std::map<std::string, std::shared_ptr<Compressor>> compressors_;
  std::int64_t step_counter_ = 0;
  double loss_local_ = 0, grad_sq_local_ = 0, pp_bytes_ = 0, dp_bytes_ = 0, tp_bytes_ = 0;
  double encode_s_ = 0, decode_s_ = 0, comp_dense_ = 0, comp_wire_ = 0;
  double traffic_[7] = {0, 0, 0, 0, 0, 0, 0};
};

}  // namespace

absl::StatusOr<ExecutionResult> Execute(const ExecutorInputs& inputs, std::vector<std::unique_ptr<CommGroup>> endpoints) {
  if (endpoints.empty()) return absl::InvalidArgumentError("no ranks to run on");
  for (const auto& e : endpoints) {
    // The engine's tensors live in host memory; a device-memory endpoint would be handed
    // pointers it cannot use.
    if (e->memory_space() != MemorySpace::kHost) {
      return absl::InvalidArgumentError(
          "the executor trains on the CPU and passes host buffers, but the communicator's endpoints take GPU "
          "memory; with the nccl communicator set its parameter host_buffers = true");
    }
  }
  const size_t n = endpoints.size();
  std::vector<ExecutionResult> results(n);
  std::vector<absl::Status> status(n);
  std::mutex mu;
  // Every rank's matrix-product backend before any rank starts, so that a missing GPU is one
  // clear error rather than ranks waiting for a peer that never came.
  std::vector<std::unique_ptr<train::GemmBackend>> gemms(n);
  if (inputs.make_gemm) {
    for (size_t i = 0; i < n; ++i) {
      const int world_rank = endpoints[i]->world_ranks()[static_cast<size_t>(endpoints[i]->rank())];
      absl::StatusOr<std::unique_ptr<train::GemmBackend>> made = inputs.make_gemm(world_rank);
      if (!made.ok()) {
        return absl::Status(made.status().code(), absl::StrCat("rank ", world_rank, ": ", made.status().message()));
      }
      gemms[i] = std::move(*made);
    }
  }
  auto body = [&](size_t i) {
    std::optional<train::ScopedGemm> gemm_scope;
    if (gemms[i] != nullptr) gemm_scope.emplace(*gemms[i]);
    RankRunner runner(inputs, *endpoints[i]);
    absl::Status st = runner.Setup();
    for (std::int64_t step = 0; st.ok() && step < inputs.train.steps; ++step) {
      std::vector<TaskTime> times;
      const bool last = step + 1 == inputs.train.steps;
      auto rec = runner.Step(step, last ? &times : nullptr);
      if (!rec.ok()) {
        st = rec.status();
        break;
      }
      results[i].steps.push_back(*rec);
      if (last) {
        results[i].last_step_tasks = std::move(times);
        results[i].pipeline_bytes_per_step = runner.traffic()[0];
        results[i].data_parallel_bytes_per_step = runner.traffic()[1];
        results[i].tensor_parallel_bytes_per_step = runner.traffic()[2];
        results[i].encode_s_per_step = runner.traffic()[3];
        results[i].decode_s_per_step = runner.traffic()[4];
        results[i].compressed_dense_bytes_per_step = runner.traffic()[5];
        results[i].compressed_wire_bytes_per_step = runner.traffic()[6];
      }
    }
    if (st.ok()) st = runner.Evaluate(results[i]);
    std::lock_guard<std::mutex> lock(mu);
    status[i] = st.ok() ? st : absl::Status(st.code(), absl::StrCat("rank ", endpoints[i]->rank(), ": ", st.message()));
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back(body, i);
  body(0);
  for (auto& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  ExecutionResult out = std::move(results[0]);
  for (size_t i = 1; i < n; ++i) {
    out.last_step_tasks.insert(out.last_step_tasks.end(), results[i].last_step_tasks.begin(),
                               results[i].last_step_tasks.end());
  }
  return out;
}

}  // namespace testbed::exec
