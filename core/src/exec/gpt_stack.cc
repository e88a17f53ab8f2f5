#include "exec/gpt_stack.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "testbed/status_macros.h"
#include "testbed/train/embedding.h"

namespace testbed::exec {

// ---- attention ----

AttentionSublayer::AttentionSublayer(const std::string& name, std::int64_t dim, int heads, std::int64_t seq_len,
                                     train::Rng& rng, double init_std)
    : ln_(name + ".ln", dim),
      attn_(name + ".attn", dim, heads, seq_len, rng, init_std),
      bias_(name + ".out_bias", Matrix<float>::Zero(1, dim)) {}

AttentionSublayer AttentionSublayer::Shard(int rank, int size, AllReduceFn<float> reduce) const {
  return AttentionSublayer(ln_, train::CausalSelfAttention<float>::Shard(attn_, rank, size), bias_, size,
                           std::move(reduce));
}

absl::Status AttentionSublayer::Reduce(Matrix<float>& m) const {
  if (tp_ == 1) return absl::OkStatus();
  if (!reduce_) return absl::FailedPreconditionError(absl::StrCat(bias_.name, ": a tensor-parallel shard needs an all-reduce"));
  return reduce_(m);
}

absl::StatusOr<Matrix<float>> AttentionSublayer::ForwardPartial(const Matrix<float>& x, LayerCache<float>& cache) {
  cache.Clear();
  cache.children.resize(2);
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> a, ln_.Forward(x, cache.children[0]));
  return attn_.Forward(a, cache.children[1]);  // partial sums over the heads of this rank
}

Matrix<float> AttentionSublayer::ForwardFinish(const Matrix<float>& x, const Matrix<float>& reduced) const {
  Matrix<float> y = x + reduced;
  y.rowwise() += bias_.value.row(0);
  return y;
}

absl::StatusOr<Matrix<float>> AttentionSublayer::Forward(const Matrix<float>& x, LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> o, ForwardPartial(x, cache));
  TESTBED_RETURN_IF_ERROR(Reduce(o));
  return ForwardFinish(x, o);
}

absl::StatusOr<Matrix<float>> AttentionSublayer::BackwardPartial(const Matrix<float>& dy, const LayerCache<float>& cache) {
  bias_.grad.row(0) += dy.colwise().sum();
  return attn_.Backward(dy, cache.children[1]);  // partial input gradients of the column-parallel QKV
}

absl::StatusOr<Matrix<float>> AttentionSublayer::BackwardFinish(const Matrix<float>& dy, const Matrix<float>& reduced,
                                                              const LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dx, ln_.Backward(reduced, cache.children[0]));
  return Matrix<float>(dx + dy);
}

absl::StatusOr<Matrix<float>> AttentionSublayer::Backward(const Matrix<float>& dy, const LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> da, BackwardPartial(dy, cache));
  TESTBED_RETURN_IF_ERROR(Reduce(da));
  return BackwardFinish(dy, da, cache);
}

absl::Status AttentionSublayer::SetQuantization(const train::LayerQuant& q) { return attn_.SetQuantization(q); }

std::vector<train::Param<float>*> AttentionSublayer::Params() {
  std::vector<train::Param<float>*> out = ln_.Params();
  for (train::Param<float>* p : attn_.Params()) out.push_back(p);
  out.push_back(&bias_);
  return out;
}

// ---- MLP ----

MlpSublayer::MlpSublayer(const std::string& name, std::int64_t dim, std::int64_t hidden, train::Rng& rng,
                         double init_std)
    : ln_(name + ".ln", dim),
      fc1_(train::Linear<float>(name + ".fc1", dim, hidden, true, rng, init_std), 0, 1),
      fc2_(train::Linear<float>(name + ".fc2", hidden, dim, false, rng, init_std), 0, 1),
      bias_(name + ".fc2_bias", Matrix<float>::Zero(1, dim)) {}

MlpSublayer MlpSublayer::Shard(int rank, int size, AllReduceFn<float> reduce) const {
  return MlpSublayer(ln_, train::ColumnParallelLinear<float>(fc1_.shard(), rank, size),
                     train::RowParallelLinear<float>(fc2_.shard(), rank, size), bias_, size, std::move(reduce));
}

absl::Status MlpSublayer::Reduce(Matrix<float>& m) const {
  if (tp_ == 1) return absl::OkStatus();
  if (!reduce_) return absl::FailedPreconditionError(absl::StrCat(bias_.name, ": a tensor-parallel shard needs an all-reduce"));
  return reduce_(m);
}

absl::StatusOr<Matrix<float>> MlpSublayer::ForwardPartial(const Matrix<float>& x, LayerCache<float>& cache) {
  cache.Clear();
  cache.children.resize(4);
  auto& c = cache.children;
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> m, ln_.Forward(x, c[0]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> u, fc1_.Forward(m, c[1]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> g, gelu_.Forward(u, c[2]));
  return fc2_.Forward(g, c[3]);
}

Matrix<float> MlpSublayer::ForwardFinish(const Matrix<float>& x, const Matrix<float>& reduced) const {
  Matrix<float> y = x + reduced;
  y.rowwise() += bias_.value.row(0);
  return y;
}

absl::StatusOr<Matrix<float>> MlpSublayer::Forward(const Matrix<float>& x, LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> o, ForwardPartial(x, cache));
  TESTBED_RETURN_IF_ERROR(Reduce(o));
  return ForwardFinish(x, o);
}

absl::StatusOr<Matrix<float>> MlpSublayer::BackwardPartial(const Matrix<float>& dy, const LayerCache<float>& cache) {
  const auto& c = cache.children;
  bias_.grad.row(0) += dy.colwise().sum();
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dg, fc2_.Backward(dy, c[3]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> du, gelu_.Backward(dg, c[2]));
  return fc1_.Backward(du, c[1]);
}

absl::StatusOr<Matrix<float>> MlpSublayer::BackwardFinish(const Matrix<float>& dy, const Matrix<float>& reduced,
                                                        const LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dx, ln_.Backward(reduced, cache.children[0]));
  return Matrix<float>(dx + dy);
}

absl::StatusOr<Matrix<float>> MlpSublayer::Backward(const Matrix<float>& dy, const LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dm, BackwardPartial(dy, cache));
  TESTBED_RETURN_IF_ERROR(Reduce(dm));
  return BackwardFinish(dy, dm, cache);
}

absl::Status MlpSublayer::SetQuantization(const train::LayerQuant& q) {
  TESTBED_RETURN_IF_ERROR(fc1_.SetQuantization(q));
  train::LayerQuant second = q;
  second.seed = q.seed + 1;
  return fc2_.SetQuantization(second);
}

std::vector<train::Param<float>*> MlpSublayer::Params() {
  std::vector<train::Param<float>*> out = ln_.Params();
  for (train::Param<float>* p : fc1_.Params()) out.push_back(p);
  for (train::Param<float>* p : fc2_.Params()) out.push_back(p);
  out.push_back(&bias_);
  return out;
}

// ---- head ----

GptHead::GptHead(const std::string& name, std::int64_t dim, std::int64_t vocab, train::Rng& rng, double init_std)
    : ln_(name + ".ln", dim), proj_(name + ".proj", dim, vocab, false, rng, init_std) {}

absl::StatusOr<Matrix<float>> GptHead::Forward(const Matrix<float>& x, LayerCache<float>& cache) {
  cache.Clear();
  cache.children.resize(2);
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> n, ln_.Forward(x, cache.children[0]));
  return proj_.Forward(n, cache.children[1]);
}

absl::StatusOr<Matrix<float>> GptHead::Backward(const Matrix<float>& dy, const LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dn, proj_.Backward(dy, cache.children[1]));
  return ln_.Backward(dn, cache.children[0]);
}

std::vector<train::Param<float>*> GptHead::Params() {
  std::vector<train::Param<float>*> out = ln_.Params();
  for (train::Param<float>* p : proj_.Params()) out.push_back(p);
  return out;
}

// ---- mixture of experts ----

MoeSublayer::MoeSublayer(const std::string& name, std::int64_t dim, std::int64_t hidden, int experts, int top_k,
                         train::Rng& rng, double init_std)
    : ln_(name + ".ln", dim),
      moe_(std::make_unique<train::MoeLayer<float>>(
          name, train::MoeConfig{.dim = dim, .hidden = hidden, .experts = experts, .top_k = top_k, .capacity_factor = 0},
          rng, init_std)),
      experts_(experts) {}

absl::StatusOr<MoeSublayer> MoeSublayer::ExpertParallel(int rank, int size, train::ExpertHolders holders,
                                                        train::RowExchangeFn<float> exchange) const {
  const auto* full = dynamic_cast<const train::MoeLayer<float>*>(moe_.get());
  if (full == nullptr) return absl::FailedPreconditionError("moe sublayer: already expert-parallel");
  TESTBED_ASSIGN_OR_RETURN(auto ep, train::ExpertParallelMoe<float>::Create(*full, rank, size, std::move(holders),
                                                                            std::move(exchange)));
  return MoeSublayer(ln_, std::make_unique<train::ExpertParallelMoe<float>>(std::move(ep)), experts_);
}

absl::Status MoeSublayer::SetHolders(train::ExpertHolders holders) {
  auto* ep = dynamic_cast<train::ExpertParallelMoe<float>*>(moe_.get());
  if (ep == nullptr) return absl::FailedPreconditionError("moe sublayer: holders are for an expert-parallel layer");
  return ep->SetHolders(std::move(holders));
}

std::vector<std::int64_t> MoeSublayer::TokensPerExpert(const LayerCache<float>& cache) const {
  const LayerCache<float>& c = cache.children[1];
  if (const auto* ep = dynamic_cast<const train::ExpertParallelMoe<float>*>(moe_.get())) return ep->TokensPerExpert(c);
  return static_cast<const train::MoeLayer<float>&>(*moe_).Routing(c).tokens_per_expert;
}

std::vector<std::int64_t> MoeSublayer::ComputedPerExpert(const LayerCache<float>& cache) const {
  const LayerCache<float>& c = cache.children[1];
  if (const auto* ep = dynamic_cast<const train::ExpertParallelMoe<float>*>(moe_.get())) return ep->ComputedPerExpert(c);
  return static_cast<const train::MoeLayer<float>&>(*moe_).Routing(c).tokens_per_expert;
}

absl::StatusOr<Matrix<float>> MoeSublayer::Forward(const Matrix<float>& x, LayerCache<float>& cache) {
  cache.Clear();
  cache.children.resize(2);
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> n, ln_.Forward(x, cache.children[0]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> m, moe_->Forward(n, cache.children[1]));
  return Matrix<float>(x + m);
}

absl::StatusOr<Matrix<float>> MoeSublayer::Backward(const Matrix<float>& dy, const LayerCache<float>& cache) {
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dn, moe_->Backward(dy, cache.children[1]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<float> dx, ln_.Backward(dn, cache.children[0]));
  return Matrix<float>(dx + dy);
}

std::vector<train::Param<float>*> MoeSublayer::ExpertParams(int e) {
  // Both MoE layers list the gate weight, then four parameters per expert.
  const std::vector<train::Param<float>*> all = moe_->Params();
  const auto first = all.begin() + 1 + 4 * static_cast<std::ptrdiff_t>(e);
  return std::vector<train::Param<float>*>(first, first + 4);
}

std::vector<train::Param<float>*> MoeSublayer::Params() {
  std::vector<train::Param<float>*> out = ln_.Params();
  for (train::Param<float>* p : moe_->Params()) out.push_back(p);
  return out;
}

// ---- the stack ----

absl::StatusOr<train::SequentialModel<float>> BuildGptStack(const ModelGraph& graph, std::uint64_t seed) {
  const ModelShape& s = graph.shape;
  if (s.family != "gpt" && s.family != "moe-gpt") {
    return absl::InvalidArgumentError(absl::StrCat("model '", s.name, "': real execution runs the 'gpt' and 'moe-gpt' "
                                                   "families, not '", s.family, "'"));
  }
  constexpr double kInitStd = 0.02;
  train::Rng rng(seed);
  train::SequentialModel<float> model;
  for (const Layer& l : graph.layers) {
    switch (l.kind) {
      case LayerKind::kEmbedding:
        model.Add(std::make_unique<train::Embedding<float>>(l.name, l.vocab, l.hidden, l.seq_len, rng, kInitStd));
        break;
      case LayerKind::kAttention:
        model.Add(std::make_unique<AttentionSublayer>(l.name, l.hidden, static_cast<int>(l.heads), l.seq_len, rng,
                                                      kInitStd));
        break;
      case LayerKind::kMlp:
        model.Add(std::make_unique<MlpSublayer>(l.name, l.hidden, l.ffn_hidden, rng, kInitStd));
        break;
      case LayerKind::kMoe:
        model.Add(std::make_unique<MoeSublayer>(l.name, l.hidden, l.ffn_hidden, static_cast<int>(l.experts),
                                                static_cast<int>(l.top_k), rng, kInitStd));
        break;
      case LayerKind::kHead:
        model.Add(std::make_unique<GptHead>(l.name, l.hidden, l.vocab, rng, kInitStd));
        break;
      default:
        return absl::UnimplementedError(absl::StrCat("real execution has no ", LayerKindName(l.kind), " layer"));
    }
  }
  return model;
}

train::SequentialModel<float> ShardGptStack(const train::SequentialModel<float>& full, int rank, int size,
                                            AllReduceFn<float> reduce) {
  train::SequentialModel<float> shard(full);
  if (size == 1) return shard;
  for (int i = 0; i < full.num_layers(); ++i) {
    if (const auto* a = dynamic_cast<const AttentionSublayer*>(&full.layer(i))) {
      shard.Replace(i, std::make_unique<AttentionSublayer>(a->Shard(rank, size, reduce)));
    } else if (const auto* m = dynamic_cast<const MlpSublayer*>(&full.layer(i))) {
      shard.Replace(i, std::make_unique<MlpSublayer>(m->Shard(rank, size, reduce)));
    }
  }
  return shard;
}

bool ParamIsSharded(const std::string& name) {
  for (const char* suffix : {".qkv.weight", ".qkv.bias", ".out.weight", ".fc1.weight", ".fc1.bias", ".fc2.weight"}) {
    if (absl::EndsWith(name, suffix)) return true;
  }
  return false;
}

}  // namespace testbed::exec
