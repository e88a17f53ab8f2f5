#include "testbed/train/transformer_block.h"

#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
TransformerBlock<T>::TransformerBlock(const std::string& name, std::int64_t dim, int heads, std::int64_t seq_len,
                                      std::int64_t mlp_hidden, Rng& rng, double init_std)
    : ln1_(name + ".ln1", dim),
      attn_(name + ".attn", dim, heads, seq_len, rng, init_std),
      attn_bias_(name + ".attn.out.bias", Matrix<T>::Zero(1, dim)),
      ln2_(name + ".ln2", dim),
      fc1_(Linear<T>(name + ".fc1", dim, mlp_hidden, true, rng, init_std), 0, 1),
      fc2_(Linear<T>(name + ".fc2", mlp_hidden, dim, false, rng, init_std), 0, 1),
      fc2_bias_(name + ".fc2.bias", Matrix<T>::Zero(1, dim)) {}

template <typename T>
TransformerBlock<T>::TransformerBlock(LayerNorm<T> ln1, CausalSelfAttention<T> attn, Param<T> attn_bias,
                                      LayerNorm<T> ln2, ColumnParallelLinear<T> fc1, RowParallelLinear<T> fc2,
                                      Param<T> fc2_bias, int tp_size, AllReduceFn<T> all_reduce)
    : ln1_(std::move(ln1)),
      attn_(std::move(attn)),
      attn_bias_(std::move(attn_bias)),
      ln2_(std::move(ln2)),
      fc1_(std::move(fc1)),
      fc2_(std::move(fc2)),
      fc2_bias_(std::move(fc2_bias)),
      tp_size_(tp_size),
      all_reduce_(std::move(all_reduce)) {}

template <typename T>
TransformerBlock<T> TransformerBlock<T>::Shard(const TransformerBlock& full, int rank, int size,
                                               AllReduceFn<T> all_reduce) {
  return TransformerBlock(full.ln1_, CausalSelfAttention<T>::Shard(full.attn_, rank, size), full.attn_bias_, full.ln2_,
                          ColumnParallelLinear<T>(full.fc1_.shard(), rank, size),
                          RowParallelLinear<T>(full.fc2_.shard(), rank, size), full.fc2_bias_, size,
                          std::move(all_reduce));
}

template <typename T>
TransformerBlock<T> TransformerBlock<T>::Unshard(const std::vector<const TransformerBlock*>& shards) {
  std::vector<const CausalSelfAttention<T>*> attn;
  std::vector<const ColumnParallelLinear<T>*> fc1;
  std::vector<const RowParallelLinear<T>*> fc2;
  for (const TransformerBlock* s : shards) {
    attn.push_back(&s->attn_);
    fc1.push_back(&s->fc1_);
    fc2.push_back(&s->fc2_);
  }
  const TransformerBlock& first = *shards[0];
  return TransformerBlock(first.ln1_, CausalSelfAttention<T>::Unshard(attn), first.attn_bias_, first.ln2_,
                          ColumnParallelLinear<T>(ColumnParallelLinear<T>::Unshard(fc1), 0, 1),
                          RowParallelLinear<T>(RowParallelLinear<T>::Unshard(fc2), 0, 1), first.fc2_bias_, 1, nullptr);
}

template <typename T>
absl::Status TransformerBlock<T>::Reduce(Matrix<T>& m) const {
  if (tp_size_ == 1) return absl::OkStatus();
  if (!all_reduce_) {
    return absl::FailedPreconditionError(attn_bias_.name + ": a tensor-parallel shard needs an all-reduce");
  }
  return all_reduce_(m);
}

template <typename T>
absl::StatusOr<Matrix<T>> TransformerBlock<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  cache.Clear();
  cache.children.resize(6);
  auto& c = cache.children;
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> a, ln1_.Forward(x, c[0]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> attn, attn_.Forward(a, c[1]));
  TESTBED_RETURN_IF_ERROR(Reduce(attn));
  Matrix<T> h = x + attn;
  h.rowwise() += attn_bias_.value.row(0);
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> m, ln2_.Forward(h, c[2]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> u, fc1_.Forward(m, c[3]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> g, gelu_.Forward(u, c[4]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> mlp, fc2_.Forward(g, c[5]));
  TESTBED_RETURN_IF_ERROR(Reduce(mlp));
  Matrix<T> y = h + mlp;
  y.rowwise() += fc2_bias_.value.row(0);
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> TransformerBlock<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCache(attn_bias_.name, cache.children.size() == 6));
  const auto& c = cache.children;
  fc2_bias_.grad.row(0) += dy.colwise().sum();
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dg, fc2_.Backward(dy, c[5]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> du, gelu_.Backward(dg, c[4]));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dm, fc1_.Backward(du, c[3]));
  TESTBED_RETURN_IF_ERROR(Reduce(dm));  // each shard saw part of the MLP: sum their dm
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dh_norm, ln2_.Backward(dm, c[2]));
  const Matrix<T> dh = dy + dh_norm;
  attn_bias_.grad.row(0) += dh.colwise().sum();
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> da, attn_.Backward(dh, c[1]));
  TESTBED_RETURN_IF_ERROR(Reduce(da));  // likewise for the heads
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dx_norm, ln1_.Backward(da, c[0]));
  return Matrix<T>(dh + dx_norm);
}

template <typename T>
std::vector<Param<T>*> TransformerBlock<T>::Params() {
  std::vector<Param<T>*> p = ln1_.Params();
  for (Param<T>* q : attn_.Params()) p.push_back(q);
  p.push_back(&attn_bias_);
  for (Param<T>* q : ln2_.Params()) p.push_back(q);
  for (Param<T>* q : fc1_.Params()) p.push_back(q);
  for (Param<T>* q : fc2_.Params()) p.push_back(q);
  p.push_back(&fc2_bias_);
  return p;
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace testbed::train
