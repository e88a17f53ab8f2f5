#include "testbed/train/attention.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"
#include "testbed/train/sharding.h"

namespace testbed::train {

template <typename T>
CausalSelfAttention<T>::CausalSelfAttention(const std::string& name, std::int64_t dim, int heads, std::int64_t seq_len,
                                            Rng& rng, double init_std)
    : dim_(dim),
      heads_(heads),
      first_head_(0),
      local_heads_(heads),
      seq_len_(seq_len),
      qkv_(name + ".qkv", dim, 3 * dim, true, rng, init_std),
      out_(name + ".out", dim, dim, false, rng, init_std) {}

template <typename T>
CausalSelfAttention<T>::CausalSelfAttention(std::int64_t dim, int heads, int first_head, int local_heads,
                                            std::int64_t seq_len, Linear<T> qkv, Linear<T> out)
    : dim_(dim),
      heads_(heads),
      first_head_(first_head),
      local_heads_(local_heads),
      seq_len_(seq_len),
      qkv_(std::move(qkv)),
      out_(std::move(out)) {}

template <typename T>
std::vector<std::int64_t> CausalSelfAttention<T>::QkvColumns(std::int64_t dim, int heads, int first, int count) {
  const std::int64_t d = dim / heads;
  std::vector<std::int64_t> cols;
  for (int part = 0; part < 3; ++part) {  // q, k, v blocks of the full projection
    for (std::int64_t c = first * d; c < (first + count) * d; ++c) cols.push_back(part * dim + c);
  }
  return cols;
}

template <typename T>
CausalSelfAttention<T> CausalSelfAttention<T>::Shard(const CausalSelfAttention& full, int rank, int size) {
  const ShardRange h = EvenShard(full.local_heads_, rank, size);
  const int first = full.first_head_ + static_cast<int>(h.offset);
  const int count = static_cast<int>(h.count);
  // Columns relative to `full`'s own (possibly already sharded) qkv layout.
  const std::vector<std::int64_t> cols =
      QkvColumns(full.local_heads_ * full.head_dim(), full.local_heads_, static_cast<int>(h.offset), count);
  const std::string& qname = full.qkv_.weight().name;
  Linear<T> qkv(qname.substr(0, qname.size() - 7), SelectColumns(full.qkv_.weight().value, cols),
                SelectColumns(full.qkv_.bias().value, cols));
  qkv.weight().grad = SelectColumns(full.qkv_.weight().grad, cols);
  qkv.bias().grad = SelectColumns(full.qkv_.bias().grad, cols);
  const std::int64_t d = full.head_dim();
  const std::string& oname = full.out_.weight().name;
  Linear<T> out(oname.substr(0, oname.size() - 7), full.out_.weight().value.middleRows(h.offset * d, count * d),
                std::nullopt);
  out.weight().grad = full.out_.weight().grad.middleRows(h.offset * d, count * d);
  return CausalSelfAttention(full.dim_, full.heads_, first, count, full.seq_len_, std::move(qkv), std::move(out));
}

template <typename T>
CausalSelfAttention<T> CausalSelfAttention<T>::Unshard(const std::vector<const CausalSelfAttention*>& shards) {
  const CausalSelfAttention& a = *shards[0];
  const std::int64_t dim = a.dim_;
  const int heads = a.heads_;
  Matrix<T> w(dim, 3 * dim), wg(dim, 3 * dim), b(1, 3 * dim), bg(1, 3 * dim);
  std::vector<const Matrix<T>*> ow, og;
  for (const CausalSelfAttention* s : shards) {
    const std::vector<std::int64_t> cols = QkvColumns(dim, heads, s->first_head_, s->local_heads_);
    ScatterColumns(w, cols, s->qkv_.weight().value);
    ScatterColumns(wg, cols, s->qkv_.weight().grad);
    ScatterColumns(b, cols, s->qkv_.bias().value);
    ScatterColumns(bg, cols, s->qkv_.bias().grad);
    ow.push_back(&s->out_.weight().value);
    og.push_back(&s->out_.weight().grad);
  }
  const std::string& qname = a.qkv_.weight().name;
  Linear<T> qkv(qname.substr(0, qname.size() - 7), std::move(w), std::move(b));
  qkv.weight().grad = std::move(wg);
  qkv.bias().grad = std::move(bg);
  const std::string& oname = a.out_.weight().name;
  Linear<T> out(oname.substr(0, oname.size() - 7), ConcatRows(ow), std::nullopt);
  out.weight().grad = ConcatRows(og);
  return CausalSelfAttention(dim, heads, 0, heads, a.seq_len_, std::move(qkv), std::move(out));
}

template <typename T>
absl::StatusOr<Matrix<T>> CausalSelfAttention<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  const std::string& name = qkv_.weight().name;
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "input", x.cols(), dim_));
  if (x.rows() % seq_len_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", x.rows(), " rows is not a whole number of sequences of ", seq_len_));
  }
  cache.Clear();
  cache.children.resize(2);
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> qkv, qkv_.Forward(x, cache.children[0]));
  const std::int64_t S = seq_len_, d = head_dim(), hl = local_heads_;
  const std::int64_t batch = x.rows() / S;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  Matrix<T> probs = Matrix<T>::Zero(batch * hl * S, S);
  Matrix<T> ctx(x.rows(), hl * d);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < hl; ++h) {
      const auto q = qkv.block(b * S, h * d, S, d);
      const auto k = qkv.block(b * S, hl * d + h * d, S, d);
      const auto v = qkv.block(b * S, 2 * hl * d + h * d, S, d);
      const Matrix<T> scores = (q * k.transpose()) * scale;
      auto p = probs.block((b * hl + h) * S, 0, S, S);
      for (std::int64_t i = 0; i < S; ++i) {
        // Position i sees positions 0..i only; masked entries stay exactly zero.
        const T max = scores.row(i).head(i + 1).maxCoeff();
        p.row(i).head(i + 1) = (scores.row(i).head(i + 1).array() - max).exp();
        p.row(i).head(i + 1) /= p.row(i).head(i + 1).sum();
      }
      ctx.block(b * S, h * d, S, d) = p * v;
    }
  }
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> y, out_.Forward(ctx, cache.children[1]));
  cache.tensors.push_back(std::move(qkv));
  cache.tensors.push_back(std::move(probs));
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> CausalSelfAttention<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  const std::string& name = qkv_.weight().name;
  TESTBED_RETURN_IF_ERROR(CheckCache(name, cache.tensors.size() == 2 && cache.children.size() == 2));
  const Matrix<T>& qkv = cache.tensors[0];
  const Matrix<T>& probs = cache.tensors[1];
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dctx, out_.Backward(dy, cache.children[1]));
  const std::int64_t S = seq_len_, d = head_dim(), hl = local_heads_;
  const std::int64_t batch = qkv.rows() / S;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  Matrix<T> dqkv = Matrix<T>::Zero(qkv.rows(), qkv.cols());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < hl; ++h) {
      const auto q = qkv.block(b * S, h * d, S, d);
      const auto k = qkv.block(b * S, hl * d + h * d, S, d);
      const auto v = qkv.block(b * S, 2 * hl * d + h * d, S, d);
      const auto p = probs.block((b * hl + h) * S, 0, S, S);
      const auto dout = dctx.block(b * S, h * d, S, d);
      dqkv.block(b * S, 2 * hl * d + h * d, S, d) = p.transpose() * dout;  // dV
      const Matrix<T> dp = dout * v.transpose();
      // Softmax backward per row: dS = P .* (dP - rowsum(P .* dP)); masked P are zero.
      Matrix<T> ds = p.cwiseProduct(dp);
      const Eigen::Matrix<T, Eigen::Dynamic, 1> rowsum = ds.rowwise().sum();
      ds -= p.cwiseProduct(rowsum.replicate(1, S));
      ds *= scale;
      dqkv.block(b * S, h * d, S, d) = ds * k;                 // dQ
      dqkv.block(b * S, hl * d + h * d, S, d) = ds.transpose() * q;  // dK
    }
  }
  return qkv_.Backward(dqkv, cache.children[0]);
}

template <typename T>
std::vector<Param<T>*> CausalSelfAttention<T>::Params() {
  std::vector<Param<T>*> p = qkv_.Params();
  for (Param<T>* o : out_.Params()) p.push_back(o);
  return p;
}

template class CausalSelfAttention<float>;
template class CausalSelfAttention<double>;

}  // namespace testbed::train
