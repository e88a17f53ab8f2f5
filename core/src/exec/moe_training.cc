#include "exec/moe_training.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exec/gpt_stack.h"
#include "exec/replica_sync.h"
#include "testbed/communicator.h"
#include "testbed/load_balancer.h"
#include "testbed/routing_trace.h"
#include "testbed/status_macros.h"
#include "testbed/train/adam.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/sgd.h"

namespace testbed::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Rows to every rank of `comm` and back: the row counts by all-to-all, the rows by
// all-to-all-v (row-major matrices are contiguous).
train::RowExchangeFn<float> ExchangeOver(CommGroup& comm) {
  return [&comm](const std::vector<Matrix<float>>& send) -> absl::StatusOr<std::vector<Matrix<float>>> {
    const int R = comm.size();
    const Eigen::Index cols = send.front().cols();
    std::vector<std::int64_t> rows_out(static_cast<size_t>(R)), rows_in(static_cast<size_t>(R));
    for (int d = 0; d < R; ++d) rows_out[static_cast<size_t>(d)] = send[static_cast<size_t>(d)].rows();
    TESTBED_RETURN_IF_ERROR(comm.AllToAll(rows_out.data(), rows_in.data(), 1, DataType::kInt64));
    std::vector<std::int64_t> out_counts(static_cast<size_t>(R)), in_counts(static_cast<size_t>(R));
    std::vector<float> packed;
    for (int d = 0; d < R; ++d) {
      const Matrix<float>& m = send[static_cast<size_t>(d)];
      out_counts[static_cast<size_t>(d)] = m.rows() * cols;
      packed.insert(packed.end(), m.data(), m.data() + m.size());
      in_counts[static_cast<size_t>(d)] = rows_in[static_cast<size_t>(d)] * cols;
    }
    std::int64_t total = 0;
    for (std::int64_t c : in_counts) total += c;
    std::vector<float> got(static_cast<size_t>(std::max<std::int64_t>(total, 1)));
    if (packed.empty()) packed.resize(1);
    TESTBED_RETURN_IF_ERROR(comm.AllToAllV(packed.data(), out_counts, got.data(), in_counts, DataType::kFloat32));
    std::vector<Matrix<float>> recv(static_cast<size_t>(R));
    std::int64_t at = 0;
    for (int s = 0; s < R; ++s) {
      Matrix<float>& m = recv[static_cast<size_t>(s)];
      m.resize(rows_in[static_cast<size_t>(s)], cols);
      if (m.size() > 0) std::memcpy(m.data(), got.data() + at, static_cast<size_t>(m.size()) * sizeof(float));
      at += m.size();
    }
    return recv;
  };
}

train::ExpertHolders HoldersOf(const ExpertPlacement& p) { return train::ExpertHolders{p.owner, p.replicas}; }

struct StepFigures {
  double loss = 0;
  double balance_degree = 0;  // of the tokens each rank computed, mean over the MoE layers
  double copies = 0;          // expert copies in use, summed over the MoE layers
  double wall_s = 0;
  std::vector<Routing> routing;  // per MoE layer: tokens per rank and expert, one micro-batch
};

// One rank: its model (every expert's weights; the MoE layers expert-parallel over `comm`
// when ep > 1), its balancer, and a step.
class MoeRank {
 public:
  MoeRank(const ResolvedRun& run, const MoeTrainingOptions& o, CommGroup& comm, std::shared_ptr<LoadBalancer> balancer)
      : run_(run), o_(o), comm_(comm), balancer_(std::move(balancer)) {}

  absl::Status Build() {
    TESTBED_ASSIGN_OR_RETURN(model_, BuildGptStack(*o_.graph, run_.seed));
    for (int l = 0; l < model_.num_layers(); ++l) {
      if (auto* m = dynamic_cast<MoeSublayer*>(&model_.layer(l))) {
        moe_.push_back(l);
        placement_.push_back(DefaultPlacement(m->experts(), comm_.size()));
        if (ep_ > 1) {
          TESTBED_ASSIGN_OR_RETURN(MoeSublayer ep, m->ExpertParallel(comm_.rank(), comm_.size(),
                                                                      HoldersOf(placement_.back()), ExchangeOver(comm_)));
          model_.Replace(l, std::make_unique<MoeSublayer>(std::move(ep)));
        }
      }
    }
    params_ = model_.Params();
    // Under expert parallelism an expert's weights are its owner's to update: the optimizer
    // steps the shared parameters and the experts this rank owns.
    std::set<const train::Param<float>*> expert;
    for (size_t i = 0; i < moe_.size() && ep_ > 1; ++i) {
      auto& layer = dynamic_cast<MoeSublayer&>(model_.layer(moe_[i]));
      expert_params_.emplace_back();
      for (int e = 0; e < layer.experts(); ++e) {
        expert_params_.back().push_back(layer.ExpertParams(e));
        for (train::Param<float>* p : expert_params_.back().back()) expert.insert(p);
      }
    }
    for (train::Param<float>* p : params_) {
      if (expert.count(p) == 0) shared_params_.push_back(p);
    }
    stepped_ = shared_params_;
    for (size_t i = 0; i < expert_params_.size(); ++i) {
      for (size_t e = 0; e < expert_params_[i].size(); ++e) {
        if (placement_[i].owner[e] != comm_.rank()) continue;
        stepped_.insert(stepped_.end(), expert_params_[i][e].begin(), expert_params_[i][e].end());
      }
    }
    if (run_.train.optimizer == "sgd") {
      optimizer_ = std::make_unique<train::Sgd<float>>(train::SgdOptions{run_.train.learning_rate, o_.momentum, 0.0});
    } else {
      train::AdamOptions ao;
      ao.learning_rate = run_.train.learning_rate;
      optimizer_ = std::make_unique<train::Adam<float>>(ao);
    }
    return absl::OkStatus();
  }
  void set_ep(int ep) { ep_ = ep; }

  absl::StatusOr<StepFigures> Step(std::int64_t it, std::int64_t mbs, std::int64_t micro_batch) {
    const auto t0 = Clock::now();
    const int R = comm_.size(), rank = comm_.rank();
    const std::int64_t seq = o_.graph->shape.seq_len;
    TESTBED_ASSIGN_OR_RETURN(Batch batch, o_.source(it, R * mbs * micro_batch));
    const double normalizer = static_cast<double>(R * mbs * micro_batch * seq);
    const size_t E = moe_.empty() ? 0 : static_cast<size_t>(dynamic_cast<MoeSublayer&>(model_.layer(moe_[0])).experts());
    // Per MoE layer: tokens this rank routed to each expert, and tokens it computed.
    std::vector<double> routed(moe_.size() * E, 0.0), computed(moe_.size(), 0.0);
    std::vector<double> sums = {0.0};
    for (std::int64_t m = 0; m < mbs; ++m) {
      const std::int64_t first = ((m * R) + rank) * micro_batch * seq, rows = micro_batch * seq;
      Matrix<float> x = batch.inputs.middleRows(first, rows);
      std::vector<std::int64_t> targets(batch.targets.begin() + first, batch.targets.begin() + first + rows);
      std::vector<train::LayerCache<float>> caches;
      TESTBED_ASSIGN_OR_RETURN(Matrix<float> logits, model_.Forward(x, caches));
      TESTBED_ASSIGN_OR_RETURN(auto lg, train::SoftmaxCrossEntropy<float>(logits, targets, normalizer));
      TESTBED_RETURN_IF_ERROR(model_.Backward(lg.dlogits, caches).status());
      sums[0] += lg.loss;
      for (size_t i = 0; i < moe_.size(); ++i) {
        const auto& layer = dynamic_cast<const MoeSublayer&>(model_.layer(moe_[i]));
        const auto tokens = layer.TokensPerExpert(caches[static_cast<size_t>(moe_[i])]);
        for (size_t e = 0; e < E; ++e) routed[i * E + e] += static_cast<double>(tokens[e]) / static_cast<double>(mbs);
        for (std::int64_t c : layer.ComputedPerExpert(caches[static_cast<size_t>(moe_[i])])) {
          computed[i] += static_cast<double>(c) / static_cast<double>(mbs);
        }
      }
    }
    if (R > 1) {
      TESTBED_RETURN_IF_ERROR(SumGradients(comm_, shared_params_, flat_));
      TESTBED_RETURN_IF_ERROR(ReduceCopiesToOwners());
      TESTBED_RETURN_IF_ERROR(comm_.AllReduce(sums.data(), sums.data(), 1, DataType::kFloat64, ReduceOp::kSum));
    }
    // Every rank's routing and load: gathered, the same on every rank.
    std::vector<double> all_routed(routed.size() * static_cast<size_t>(R)), all_computed(computed.size() * static_cast<size_t>(R));
    if (R > 1) {
      TESTBED_RETURN_IF_ERROR(comm_.AllGather(routed.data(), all_routed.data(), static_cast<std::int64_t>(routed.size()), DataType::kFloat64));
      TESTBED_RETURN_IF_ERROR(comm_.AllGather(computed.data(), all_computed.data(), static_cast<std::int64_t>(computed.size()), DataType::kFloat64));
    } else {
      all_routed = routed;
      all_computed = computed;
    }
    if (o_.weight_decay > 0) {
      for (train::Param<float>* p : stepped_) p->grad += static_cast<float>(o_.weight_decay) * p->value;
    }
    optimizer_->Step(stepped_);
    for (train::Param<float>* p : params_) p->ZeroGrad();
    StepFigures f;
    f.loss = sums[0];
    for (size_t i = 0; i < moe_.size(); ++i) {
      Routing r{R, static_cast<int>(E), std::vector<double>(static_cast<size_t>(R) * E)};
      std::vector<double> load(static_cast<size_t>(R));
      for (int s = 0; s < R; ++s) {
        for (size_t e = 0; e < E; ++e) r.tokens[static_cast<size_t>(s) * E + e] = all_routed[static_cast<size_t>(s) * routed.size() + i * E + e];
        load[static_cast<size_t>(s)] = all_computed[static_cast<size_t>(s) * computed.size() + i];
      }
      f.balance_degree += BalanceDegree(load) / static_cast<double>(moe_.size());
      for (const auto& c : placement_[i].replicas) f.copies += static_cast<double>(c.size());
      f.routing.push_back(std::move(r));
    }
    TESTBED_RETURN_IF_ERROR(Rebalance(it, f.routing));
    TESTBED_RETURN_IF_ERROR(SendWeightsToCopies());
    f.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return f;
  }

 private:
  // Pro-Prophet's Agg: each copy's gradients of an expert go to its owner, which adds them.
  absl::Status ReduceCopiesToOwners() {
    std::vector<std::vector<float>> out, in;
    std::vector<std::pair<std::vector<train::Param<float>*>*, size_t>> add;  // params, index into `in`
    std::vector<CommRequestPtr> pending;
    for (size_t i = 0; i < expert_params_.size(); ++i) {
      for (size_t e = 0; e < expert_params_[i].size(); ++e) {
        const int owner = placement_[i].owner[e];
        const int tag = Tag(i, e, 0);
        for (int c : placement_[i].replicas[e]) {
          auto& ps = expert_params_[i][e];
          if (c == comm_.rank()) {
            out.push_back(Flatten(ps, true));
            TESTBED_ASSIGN_OR_RETURN(auto r, comm_.ISend(out.back().data(), static_cast<std::int64_t>(out.back().size()),
                                                         DataType::kFloat32, owner, tag));
            pending.push_back(std::move(r));
          } else if (owner == comm_.rank()) {
            in.emplace_back(Flatten(ps, true).size());
            add.emplace_back(&ps, in.size() - 1);
            TESTBED_ASSIGN_OR_RETURN(auto r, comm_.IRecv(in.back().data(), static_cast<std::int64_t>(in.back().size()),
                                                         DataType::kFloat32, c, tag));
            pending.push_back(std::move(r));
          }
        }
      }
    }
    for (auto& r : pending) TESTBED_RETURN_IF_ERROR(r->Wait());
    for (auto& [ps, k] : add) Unflatten(in[k], *ps, true, true);
    return absl::OkStatus();
  }

  // Pro-Prophet's Trans: before an iteration, every copy of an expert gets its owner's weights.
  absl::Status SendWeightsToCopies() {
    std::vector<std::vector<float>> out, in;
    std::vector<std::pair<std::vector<train::Param<float>*>*, size_t>> set;
    std::vector<CommRequestPtr> pending;
    for (size_t i = 0; i < expert_params_.size(); ++i) {
      for (size_t e = 0; e < expert_params_[i].size(); ++e) {
        const int owner = placement_[i].owner[e];
        const int tag = Tag(i, e, 1);
        for (int c : placement_[i].replicas[e]) {
          auto& ps = expert_params_[i][e];
          if (owner == comm_.rank()) {
            out.push_back(Flatten(ps, false));
            TESTBED_ASSIGN_OR_RETURN(auto r, comm_.ISend(out.back().data(), static_cast<std::int64_t>(out.back().size()),
                                                         DataType::kFloat32, c, tag));
            pending.push_back(std::move(r));
          } else if (c == comm_.rank()) {
            in.emplace_back(Flatten(ps, false).size());
            set.emplace_back(&ps, in.size() - 1);
            TESTBED_ASSIGN_OR_RETURN(auto r, comm_.IRecv(in.back().data(), static_cast<std::int64_t>(in.back().size()),
                                                         DataType::kFloat32, owner, tag));
            pending.push_back(std::move(r));
          }
        }
      }
    }
    for (auto& r : pending) TESTBED_RETURN_IF_ERROR(r->Wait());
    for (auto& [ps, k] : set) Unflatten(in[k], *ps, false, false);
    return absl::OkStatus();
  }

  int Tag(size_t layer, size_t expert, int kind) const {
    const size_t experts = expert_params_.empty() ? 1 : expert_params_.front().size();
    return static_cast<int>(((layer * experts + expert) * 2 + static_cast<size_t>(kind)) % CommGroup::kMaxTag);
  }
  static std::vector<float> Flatten(const std::vector<train::Param<float>*>& ps, bool grads) {
    std::vector<float> v;
    for (const train::Param<float>* p : ps) {
      const auto& m = grads ? p->grad : p->value;
      v.insert(v.end(), m.data(), m.data() + m.size());
    }
    return v;
  }
  static void Unflatten(const std::vector<float>& v, std::vector<train::Param<float>*>& ps, bool grads, bool add) {
    size_t at = 0;
    for (train::Param<float>* p : ps) {
      auto& m = grads ? p->grad : p->value;
      for (Eigen::Index k = 0; k < m.size(); ++k) m.data()[k] = add ? m.data()[k] + v[at + static_cast<size_t>(k)] : v[at + static_cast<size_t>(k)];
      at += static_cast<size_t>(m.size());
    }
  }

  // The next iteration's placement of each MoE layer: the balancer's answer to this one's
  // routing (the same on every rank, so every rank's balancer answers alike).
  absl::Status Rebalance(std::int64_t it, const std::vector<Routing>& routing) {
    if (balancer_ == nullptr) return absl::OkStatus();
    for (size_t i = 0; i < moe_.size(); ++i) {
      const MoeLayerShape shape = MoeShapeOf(*o_.graph, moe_[i], static_cast<int>(i), comm_.size(), run_.train);
      const BalanceInput in{shape, static_cast<int>(it) + 1, routing[i], routing[i], &placement_[i]};
      TESTBED_ASSIGN_OR_RETURN(BalanceDecision d, balancer_->Place(in));
      TESTBED_RETURN_IF_ERROR(CheckPlacement(d.placement, shape.experts, shape.ranks,
                                             absl::StrCat("load_balancer, layer ", moe_[i], ", iteration ", it + 1)));
      if (d.placement.owner != placement_[i].owner) {
        return absl::UnimplementedError(absl::StrCat("load_balancer, layer ", moe_[i], ", iteration ", it + 1,
                                                     ": real training keeps each expert on its owner (its optimizer "
                                                     "state lives there); the balancer moved an owner"));
      }
      placement_[i] = std::move(d.placement);
      TESTBED_RETURN_IF_ERROR(dynamic_cast<MoeSublayer&>(model_.layer(moe_[i])).SetHolders(HoldersOf(placement_[i])));
    }
    return absl::OkStatus();
  }

  const ResolvedRun& run_;
  const MoeTrainingOptions& o_;
  CommGroup& comm_;
  std::shared_ptr<LoadBalancer> balancer_;
  int ep_ = 1;
  train::SequentialModel<float> model_;
  std::vector<int> moe_;
  std::vector<ExpertPlacement> placement_;
  std::vector<train::Param<float>*> params_;
  std::vector<train::Param<float>*> shared_params_;  // all but the experts' (summed over the ranks)
  std::vector<train::Param<float>*> stepped_;        // shared and the experts this rank owns
  std::vector<std::vector<std::vector<train::Param<float>*>>> expert_params_;  // [MoE layer][expert]
  std::unique_ptr<train::Optimizer<float>> optimizer_;
  std::vector<float> flat_;
};

}  // namespace

absl::StatusOr<RunOutput> TrainMoe(const ResolvedRun& run, const Registry& registry, const RunControl& control,
                                   const MoeTrainingOptions& o) {
  const int dp = std::max(1, run.parallel.dp);
  const int ep = std::max(1, run.parallel.ep);
  if (run.parallel.tp != 1 || run.parallel.pp != 1) {
    return absl::InvalidArgumentError("[parallel] a moe-gpt model trains for real with data and expert parallelism only "
                                      "(tp = pp = 1)");
  }
  if (ep != 1 && ep != dp) {
    return absl::InvalidArgumentError(absl::StrCat("[parallel] ep = ", ep, ": real training runs expert parallelism over "
                                                   "all the data-parallel ranks (ep = dp = ", dp, ") or none (ep = 1)"));
  }
  const ComponentChoice* lb = run.Component(ComponentKind::kLoadBalancer);
  if (lb != nullptr && ep < 2) {
    return absl::InvalidArgumentError("a load balancer needs expert parallelism: set [parallel] ep = dp");
  }
  if (lb != nullptr) {
    auto capacity = lb->params.Get<double>("capacity_factor");
    if (capacity.ok() && *capacity > 0) {
      return absl::InvalidArgumentError(absl::StrCat("load_balancer '", lb->name, "': capacity_factor = ", *capacity,
                                                     "; real training runs dropless MoE layers (set it to 0)"));
    }
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
  TESTBED_ASSIGN_OR_RETURN(auto communicator,
                           registry.Create<Communicator>(run.Component(ComponentKind::kCommunicator)->name,
                                                         run.Component(ComponentKind::kCommunicator)->params));
  TESTBED_ASSIGN_OR_RETURN(auto endpoints, communicator->Connect(dp));
  const size_t hosted = endpoints.size();
  std::vector<std::shared_ptr<LoadBalancer>> balancers(hosted);
  if (lb != nullptr) {
    for (auto& b : balancers) {
      TESTBED_ASSIGN_OR_RETURN(b, registry.Create<LoadBalancer>(lb->name, lb->params));
    }
  }
  std::vector<absl::StatusOr<std::vector<StepFigures>>> results(hosted, absl::UnknownError("not run"));
  auto train_rank = [&](size_t e) -> absl::StatusOr<std::vector<StepFigures>> {
    CommGroup& comm = *endpoints[e];
    MoeRank rank(run, o, comm, balancers[e]);
    rank.set_ep(ep);
    TESTBED_RETURN_IF_ERROR(rank.Build());
    std::vector<StepFigures> steps;
    for (std::int64_t it = 0; it < run.train.steps; ++it) {
      std::vector<double> stop = {control.cancelled() ? 1.0 : 0.0};
      TESTBED_RETURN_IF_ERROR(comm.AllReduce(stop.data(), stop.data(), 1, DataType::kFloat64, ReduceOp::kMax));
      if (stop[0] > 0) break;
      TESTBED_ASSIGN_OR_RETURN(StepFigures f, rank.Step(it, mbs, micro_batch));
      steps.push_back(std::move(f));
    }
    return steps;
  };
  OnHostedRanks(results, train_rank);
  for (auto& r : results) TESTBED_RETURN_IF_ERROR(r.status());
  const std::vector<StepFigures>& steps = *results[0];
  if (steps.empty()) return absl::CancelledError("stopped before the first training step");
  const int moe_layers = static_cast<int>(steps.front().routing.size());
  if (!o.routing_trace.empty() && endpoints[0]->rank() == 0 && moe_layers > 0) {
    RoutingTrace t;
    t.iterations = static_cast<int>(steps.size());
    t.layers = moe_layers;
    t.ranks = steps.front().routing.front().ranks;
    t.experts = steps.front().routing.front().experts;
    for (const StepFigures& f : steps) {
      for (const Routing& r : f.routing) t.tokens.insert(t.tokens.end(), r.tokens.begin(), r.tokens.end());
    }
    t.model = o.graph->shape.name;
    t.source = absl::StrCat("testbed real training on the shipped text, dp = ", dp, ", ep = ", ep, ", seed ", run.seed);
    TESTBED_RETURN_IF_ERROR(WriteRoutingTrace(o.routing_trace, t));
  }
  RunOutput out;
  MetricSet& m = out.metrics;
  std::vector<std::int64_t> ids;
  std::vector<double> loss, degree, copies, wall;
  double measured = 0, mean_degree = 0, mean_copies = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    ids.push_back(static_cast<std::int64_t>(i));
    loss.push_back(steps[i].loss);
    degree.push_back(steps[i].balance_degree);
    copies.push_back(steps[i].copies / std::max(1, moe_layers));
    wall.push_back(steps[i].wall_s);
    if (i > 0 || steps.size() == 1) measured += steps[i].wall_s;
    mean_degree += degree.back() / static_cast<double>(steps.size());
    mean_copies += copies.back() / static_cast<double>(steps.size());
  }
  measured /= static_cast<double>(std::max<size_t>(1, steps.size() - (steps.size() > 1 ? 1 : 0)));
  m.Add("final_loss", steps.back().loss, "nats/token", Better::kLower);
  m.Add("first_loss", steps.front().loss, "nats/token");
  m.Add("dp", dp, "replicas");
  m.Add("ep", ep, "ranks");
  m.Add("micro_batches", static_cast<double>(mbs), "micro-batches");
  m.Add("moe_layers", moe_layers, "layers");
  m.Add("measured_balance_degree", mean_degree, "tokens", Better::kLower);
  m.Add("expert_copies_per_layer", mean_copies, "copies");
  m.Add("measured_iteration_s", measured, "s", Better::kLower);
  m.Add("routing_trace_written", o.routing_trace.empty() ? 0.0 : 1.0, "1");
  Table curve;
  curve.name = "loss_curve";
  curve.columns = {{"step", "", ids},
                   {"loss", "nats/token", loss},
                   {"balance_degree", "tokens", degree},
                   {"expert_copies_per_layer", "copies", copies},
                   {"wall_s", "s", wall}};
  out.tables.push_back(std::move(curve));
  out.notes.push_back(absl::StrCat("moe-gpt trained for real on ", dp, " ranks, expert parallelism ", ep > 1 ? "over all of them" : "off",
                                   lb != nullptr ? absl::StrCat(", load balancer ", lb->name, " placing each iteration's copies from "
                                                                "the previous iteration's measured routing") : "",
                                   ep > 1 ? "; each expert updated by its owner, copies' gradients sent to it and its weights "
                                            "sent to the copies" : ""));
  return out;
}

}  // namespace testbed::exec
