#include "expand/sparse_embedding.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "testbed/embedding_rows.h"
#include "testbed/status_macros.h"

namespace testbed::expand {

bool SparseEmbedding(const Expansion& e, int layer) {
  return e.opt.embedding_exchange == EmbeddingExchange::kAllToAll && layer == 0 && !e.model.layers.empty() &&
         e.model.layers.front().kind == LayerKind::kEmbedding;
}

absl::Status CheckSparseEmbedding(const Expansion& e) {
  if (e.opt.embedding_exchange != EmbeddingExchange::kAllToAll) return absl::OkStatus();
  const std::string what = "sparse embedding communication (embedding_exchange = \"alltoall\")";
  const std::string model = absl::StrCat("model '", e.model.shape.name, "'");
  if (e.model.layers.empty() || e.model.layers.front().kind != LayerKind::kEmbedding) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs a model whose first layer is an embedding; ", model,
                                                   e.model.layers.empty() ? " has no layers"
                                                                          : absl::StrCat(" starts with a ",
                                                                                         LayerKindName(e.model.layers.front().kind),
                                                                                         " layer")));
  }
  for (const Layer& l : e.model.layers) {
    if (l.shared_params > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", model, "'s ", l.name, " shares the embedding's matrix (tied_embeddings = true), so the "
          "table's gradient touches every row; set tied_embeddings = false"));
    }
  }
  if (e.plan.tp(0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " runs with the embedding's stage at tensor-parallel degree 1; "
                                                   "stage 0 has ", e.plan.tp(0)));
  }
  if (e.plan.zero_stage > 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " keeps each owner's rows whole; it runs without ZeRO "
                                                   "sharding (zero_stage = 0), not zero_stage = ", e.plan.zero_stage));
  }
  if (e.Compressed(0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " replaces the embedding gradient's exchange; it does not run "
                                                   "with a compressor on the embedding"));
  }
  if (e.plan.cp() > 1) return absl::InvalidArgumentError(absl::StrCat(what, " runs without context parallelism"));
  return absl::OkStatus();
}

namespace {

class SparsePass {
 public:
  explicit SparsePass(Expansion& e)
      : e_(e),
        emb_(e.model.layers.front()),
        dp_(e.plan.dp(0)),
        prefetch_(e.opt.embedding_prefetch),
        sampler_(e.ctx.tokens != nullptr ? *e.ctx.tokens : TokenModel{}, emb_.vocab, dp_,
                 e.plan.MicroBatches(0, 0) * e.plan.micro_batch * emb_.seq_len * emb_.embedding_streams,
                 emb_.seq_len, e.weight_versions, std::max(1, e.opt.embedding_priority_parts)) {
    for (int r = 0; r < dp_; ++r) members_.push_back(e.Dev(r, 0, 0));
    group_ = e.sched.Group(members_);
  }

  absl::Status Run() {
    // On each replica's sparse-comm stream, in the order a run needs them: iteration t's
    // lookups (after the update of t - lag they read), the next iteration's early lookups,
    // then the row gradients and updates of iteration t - lag + 1, whose backward, under
    // PipeDream-2BW, comes after iteration t's first forward.
    const int lag = std::max(1, e_.weight_versions);
    for (int t = 0; t < e_.iterations; ++t) {
      TESTBED_RETURN_IF_ERROR(Lookups(t, lag));
      if (t - lag + 1 >= 0) TESTBED_RETURN_IF_ERROR(Gradients(t - lag + 1));
    }
    for (int t = std::max(0, e_.iterations - lag + 1); t < e_.iterations; ++t) TESTBED_RETURN_IF_ERROR(Gradients(t));
    return absl::OkStatus();
  }

 private:
  // Iteration t's lookups (the rows the update of iteration t - lag changed wait for it), the
  // lookups of iteration t + 1's untouched rows, and the wait of t's first forwards.
  absl::Status Lookups(int t, int lag) {
    TESTBED_ASSIGN_OR_RETURN(const SparseRows* current, RowsOf(t));
    std::vector<TaskId> after_update;
    if (t >= lag) after_update = updates_[t - lag];
    std::vector<TaskId> done = prefetched_[t];
    const bool split = prefetch_ && t > 0;
    // EmbRace's priority: where the iteration's first forward runs in parts of its time steps,
    // the changed rows come in as many parts, each first needed by that part, and each part
    // of the forward waits only for its own (and the early rows).
    const int parts = TimeParts(t, *current);
    if (split && parts > 1) {
      const size_t cells = current->rows.size();
      for (DeviceId d : members_) {
        for (TaskId early : prefetched_[t]) e_.sched.AddDep(e_.forward_parts.at({t, d}).front(), early);
      }
      for (int p = 0; p < parts; ++p) {
        const std::vector<double> rows(current->stale_parts.begin() + static_cast<std::ptrdiff_t>(p * cells),
                                       current->stale_parts.begin() + static_cast<std::ptrdiff_t>((p + 1) * cells));
        const TaskId part = Lookup(t, rows, p + 1, parts + 1, after_update);
        for (DeviceId d : members_) e_.sched.AddDep(e_.forward_parts.at({t, d})[static_cast<size_t>(p)], part);
        done.push_back(part);
      }
    } else {
      done.push_back(split ? Lookup(t, current->stale, 1, 2, after_update) : Lookup(t, current->rows, 0, 1, after_update));
      for (DeviceId d : members_) {
        const TaskId first = e_.FirstCompute(t, d);
        if (first < 0) continue;
        for (TaskId id : done) e_.sched.AddDep(first, id);
      }
    }
    if (prefetch_ && t + 1 < e_.iterations) {
      TESTBED_ASSIGN_OR_RETURN(const SparseRows* next, RowsOf(t + 1));
      std::vector<double> fresh(next->rows.size());
      for (size_t i = 0; i < fresh.size(); ++i) fresh[i] = next->rows[i] - next->stale[i];
      prefetched_[t + 1] = {Lookup(t + 1, fresh, 0, 2, done)};
    }
    return absl::OkStatus();
  }

  // The parts iteration t's first forward runs in on every member (1: not split), where the
  // rows say which part first needs each changed row.
  int TimeParts(int t, const SparseRows& rows) const {
    size_t parts = 0;
    for (DeviceId d : members_) {
      auto it = e_.forward_parts.find({t, d});
      const size_t n = it == e_.forward_parts.end() ? 0 : it->second.size();
      if (d == members_.front()) parts = n;
      if (n != parts) return 1;
    }
    if (parts < 2 || rows.parts != static_cast<int>(parts) ||
        rows.stale_parts.size() != parts * rows.rows.size()) {
      return 1;
    }
    return static_cast<int>(parts);
  }

  // Iteration t's row gradients to their owners after each replica's embedding backward, then
  // the owners' updates.
  absl::Status Gradients(int t) {
    TESTBED_ASSIGN_OR_RETURN(const SparseRows* rows, RowsOf(t));
    std::vector<TaskId> grads;
    for (DeviceId d : members_) {
      auto it = e_.embedding_backward.find({t, d});
      grads.push_back(it != e_.embedding_backward.end() ? it->second : e_.FinalBackward(t, d, 0));
    }
    const TaskId exchanged = Exchange(t, rows->rows, grads);
    for (int j = 0; j < dp_; ++j) {
      double received = 0;
      for (int i = 0; i < dp_; ++i) received += rows->rows[static_cast<size_t>(i * dp_ + j)];
      updates_[t].push_back(Update(t, j, received, exchanged));
    }
    rows_.erase(t);
    return absl::OkStatus();
  }

  absl::StatusOr<const SparseRows*> RowsOf(int t) {
    auto it = rows_.find(t);
    if (it != rows_.end()) return &it->second;
    const auto& given = e_.Inputs(t).embedding_rows;
    if (auto g = given.find(0); g != given.end()) {
      if (g->second.replicas != dp_ || g->second.rows.size() != static_cast<size_t>(dp_ * dp_) ||
          g->second.stale.size() != g->second.rows.size()) {
        return absl::InvalidArgumentError(absl::StrCat("iteration ", t, "'s embedding rows are for ", g->second.replicas,
                                                       " replicas; the embedding's stage has ", dp_));
      }
      return &rows_.emplace(t, g->second).first->second;
    }
    // Drawn in order: the sampler's iterations follow one another.
    while (drawn_ <= t) {
      TESTBED_ASSIGN_OR_RETURN(SparseRows r, sampler_.Next());
      rows_.insert_or_assign(drawn_++, std::move(r));
    }
    return &rows_.at(t);
  }

  // An all-to-all-v over the embedding's replicas: bytes[i * n + j] from i to j.
  Task Collective(int t, Phase phase, const std::vector<std::int64_t>& bytes) {
    AllToAllVWork w;
    w.bytes = bytes;
    Task c = GroupTask(CollectiveOp::kAllToAllV, streams::kSparseComm, group_, 0, 0, 1, 0, phase);
    c.iteration = t;
    c.work = e_.sched.AddWork(w);
    return c;
  }

  // Replica i asks owner j for the R[i][j] rows it needs (their ids) and answers the R[j][i]
  // rows j asks it for, in one exchange; a replica's own rows stay where they are. `part`: the
  // rows this lookup fetches: every row (0 of 1), those the last update left alone (0 of 2),
  // those it changed (1 of 2). The rows wait for `deps`.
  TaskId Lookup(int t, const std::vector<double>& rows, int part, int parts, std::vector<TaskId> deps) {
    const double row_bytes = static_cast<double>(emb_.hidden) * e_.WeightElementBytes(0);
    const size_t n = static_cast<size_t>(dp_);
    std::vector<std::int64_t> bytes(n * n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (i != j) bytes[i * n + j] = static_cast<std::int64_t>(rows[i * n + j] * kIdBytes + rows[j * n + i] * row_bytes);
      }
    }
    Task c = Collective(t, Phase::kForward, bytes);
    c.sub_batch = static_cast<std::int16_t>(part);
    c.sub_batches = static_cast<std::int16_t>(parts);
    return e_.sched.Add(c, Unique(std::move(deps)));
  }

  // Each row's gradient (and its id) to its owner.
  TaskId Exchange(int t, const std::vector<double>& rows, const std::vector<TaskId>& deps) {
    const double row_bytes = static_cast<double>(emb_.hidden) * e_.GradientElementBytes(0) + kIdBytes;
    const size_t n = static_cast<size_t>(dp_);
    std::vector<std::int64_t> bytes(n * n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (i != j) bytes[i * n + j] = static_cast<std::int64_t>(rows[i * n + j] * row_bytes);
      }
    }
    return e_.sched.Add(Collective(t, Phase::kBackward, bytes), Unique(deps));
  }

  // Owner j's optimizer update of the rows it received (the rows of its own batch included).
  TaskId Update(int t, int j, double rows, TaskId after) {
    const bool adam = e_.ctx.train.optimizer == "adam";
    const double params = rows * static_cast<double>(emb_.hidden);
    Task k;
    k.kind = TaskKind::kKernel;
    k.stream = streams::kSparseComm;
    k.device = members_[static_cast<size_t>(j)];
    k.stage = 0;
    k.replica = j;
    k.iteration = t;
    k.first_layer = 0;
    k.end_layer = 1;
    k.work = e_.sched.AddWork(
        KernelWork{KernelOp::kOptimizerStep, params * (adam ? 12.0 : 3.0), params * (adam ? 28.0 : 16.0), Precision::kFp32});
    return e_.sched.Add(k, {after});
  }

  static std::vector<TaskId> Unique(std::vector<TaskId> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    v.erase(std::remove(v.begin(), v.end(), -1), v.end());
    return v;
  }

  static constexpr double kIdBytes = 8;  // a row's id (int64)
  Expansion& e_;
  const Layer& emb_;
  const int dp_;
  const bool prefetch_;
  EmbeddingRowSampler sampler_;
  int drawn_ = 0;
  std::map<int, SparseRows> rows_;
  std::map<int, std::vector<TaskId>> prefetched_;  // iteration -> its early lookups
  std::map<int, std::vector<TaskId>> updates_;     // iteration -> its owners' updates
  std::vector<DeviceId> members_;
  std::int32_t group_ = -1;
};

}  // namespace

absl::Status SparseEmbeddingPass(Expansion& e) {
  if (e.opt.embedding_exchange != EmbeddingExchange::kAllToAll || e.plan.dp(0) < 2) return absl::OkStatus();
  SparsePass pass(e);
  return pass.Run();
}

}  // namespace testbed::expand
