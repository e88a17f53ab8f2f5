#include "testbed/train/gat_layer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "graph_checks.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {
namespace {

template <typename T>
Matrix<T> GlorotUniform(Eigen::Index rows, Eigen::Index cols, double fan_in, double fan_out, Rng& rng) {
  const double limit = std::sqrt(6.0 / (fan_in + fan_out));
  Matrix<T> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>((2 * rng.Uniform() - 1) * limit);
  return m;
}

// Target i's edges (its self-loop first, then its neighbours) in the edge list built by
// Forward: they start at offsets[i] + i (i self-loops before them).
struct EdgeRange {
  std::int64_t first;
  std::int64_t count;
};

EdgeRange EdgesOf(const std::vector<std::int64_t>& offsets, std::int64_t i) {
  const std::int64_t begin = offsets[static_cast<size_t>(i)], end = offsets[static_cast<size_t>(i) + 1];
  return {begin + i, end - begin + 1};
}

}  // namespace

template <typename T>
GatLayer<T>::GatLayer(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t heads,
                      GatCombine combine, Rng& rng, bool bias, double negative_slope)
    : out_(out), heads_(heads), combine_(combine), slope_(negative_slope), has_bias_(bias) {
  const auto d_in = static_cast<double>(in), d_out = static_cast<double>(out);
  weight_ = Param<T>(name + ".weight", GlorotUniform<T>(in, heads * out, d_in, d_out, rng));
  // a_k = [a_dst,k ; a_src,k] is one 2*out -> 1 map; both halves drawn from its Glorot range.
  att_src_ = Param<T>(name + ".att_src", GlorotUniform<T>(heads, out, 2 * d_out, 1, rng));
  att_dst_ = Param<T>(name + ".att_dst", GlorotUniform<T>(heads, out, 2 * d_out, 1, rng));
  bias_ = Param<T>(name + ".bias", Matrix<T>::Zero(1, out_cols()));
}

template <typename T>
std::vector<Param<T>*> GatLayer<T>::Params() {
  if (has_bias_) return {&weight_, &att_src_, &att_dst_, &bias_};
  return {&weight_, &att_src_, &att_dst_};
}

template <typename T>
absl::StatusOr<Matrix<T>> GatLayer<T>::Forward(const Matrix<T>& x, const Csr& graph, LayerCache<T>& cache) {
  const std::string& name = weight_.name;
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "input", x.cols(), weight_.value.rows()));
  TESTBED_RETURN_IF_ERROR(CheckGraph(name, graph, x.rows()));
  const std::int64_t m = graph.targets();
  // The rows each target reads, self-loop first: target i's edges are EdgesOf(offsets, i).
  std::vector<std::int64_t> rows;
  rows.reserve(graph.neighbors.size() + static_cast<size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t begin = graph.offsets[static_cast<size_t>(i)], end = graph.offsets[static_cast<size_t>(i) + 1];
    rows.push_back(i);
    for (std::int64_t k = begin; k < end; ++k) rows.push_back(graph.neighbors[static_cast<size_t>(k)]);
  }
  Matrix<T> z = x * weight_.value;
  // Each row's score halves per head: src(r, k) = a_src,k . z_r^k, dst(i, k) = a_dst,k . z_i^k.
  Matrix<T> src(x.rows(), heads_), dst(m, heads_);
  for (std::int64_t k = 0; k < heads_; ++k) {
    src.col(k) = z.middleCols(k * out_, out_) * att_src_.value.row(k).transpose();
    dst.col(k) = z.topRows(m).middleCols(k * out_, out_) * att_dst_.value.row(k).transpose();
  }
  const auto edges = static_cast<Eigen::Index>(rows.size());
  Matrix<T> alpha(edges, heads_), leaky_grad(edges, heads_);
  Matrix<T> y = Matrix<T>::Zero(m, out_cols());
  const bool concat = combine_ == GatCombine::kConcat;
  const T scale = concat ? T(1) : T(1) / static_cast<T>(heads_);
  const T slope = static_cast<T>(slope_);
  for (std::int64_t i = 0; i < m; ++i) {
    const EdgeRange r = EdgesOf(graph.offsets, i);
    for (std::int64_t k = 0; k < heads_; ++k) {
      T top = -std::numeric_limits<T>::infinity();
      for (std::int64_t e = r.first; e < r.first + r.count; ++e) {
        const T u = dst(i, k) + src(rows[static_cast<size_t>(e)], k);
        leaky_grad(e, k) = u > 0 ? T(1) : slope;
        alpha(e, k) = u * leaky_grad(e, k);
        top = std::max(top, alpha(e, k));
      }
      T sum = 0;
      for (std::int64_t e = r.first; e < r.first + r.count; ++e) {
        alpha(e, k) = std::exp(alpha(e, k) - top);
        sum += alpha(e, k);
      }
      const Eigen::Index col = concat ? k * out_ : 0;
      for (std::int64_t e = r.first; e < r.first + r.count; ++e) {
        alpha(e, k) /= sum;
        const std::int64_t j = rows[static_cast<size_t>(e)];
        y.row(i).segment(col, out_) += (scale * alpha(e, k)) * z.row(j).segment(k * out_, out_);
      }
    }
  }
  if (has_bias_) y.rowwise() += bias_.value.row(0);
  cache.Clear();
  cache.tensors.push_back(x);
  cache.tensors.push_back(std::move(z));
  cache.tensors.push_back(std::move(alpha));
  cache.tensors.push_back(std::move(leaky_grad));
  cache.indices.push_back(graph.offsets);
  cache.indices.push_back(std::move(rows));
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> GatLayer<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  const std::string& name = weight_.name;
  TESTBED_RETURN_IF_ERROR(CheckCache(name, cache.tensors.size() == 4 && cache.indices.size() == 2));
  const Matrix<T>& x = cache.tensors[0];
  const Matrix<T>& z = cache.tensors[1];
  const Matrix<T>& alpha = cache.tensors[2];
  const Matrix<T>& leaky_grad = cache.tensors[3];
  const auto& offsets = cache.indices[0];
  const auto& rows = cache.indices[1];
  const auto m = static_cast<std::int64_t>(offsets.size()) - 1;
  TESTBED_RETURN_IF_ERROR(CheckRows(name, "output gradient", dy.rows(), m));
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "output gradient", dy.cols(), out_cols()));
  if (has_bias_) bias_.grad.row(0) += dy.colwise().sum();
  const bool concat = combine_ == GatCombine::kConcat;
  const T scale = concat ? T(1) : T(1) / static_cast<T>(heads_);
  // dz through the aggregation; dsrc, ddst: the gradients of the score halves.
  Matrix<T> dz = Matrix<T>::Zero(x.rows(), heads_ * out_);
  Matrix<T> dsrc = Matrix<T>::Zero(x.rows(), heads_), ddst = Matrix<T>::Zero(m, heads_);
  std::vector<T> dalpha;
  for (std::int64_t i = 0; i < m; ++i) {
    const EdgeRange r = EdgesOf(offsets, i);
    dalpha.resize(static_cast<size_t>(r.count));
    for (std::int64_t k = 0; k < heads_; ++k) {
      const Eigen::Matrix<T, 1, Eigen::Dynamic> g = scale * dy.row(i).segment(concat ? k * out_ : 0, out_);
      // h_i^k = sum_e alpha_e z_j: dz_j += alpha_e g, dalpha_e = g . z_j.
      T weighted = 0;  // sum_e alpha_e dalpha_e
      for (std::int64_t e = r.first; e < r.first + r.count; ++e) {
        const std::int64_t j = rows[static_cast<size_t>(e)];
        T& da = dalpha[static_cast<size_t>(e - r.first)];
        da = g.dot(z.row(j).segment(k * out_, out_));
        weighted += alpha(e, k) * da;
        dz.row(j).segment(k * out_, out_) += alpha(e, k) * g;
      }
      // Softmax, then LeakyReLU: du_e = alpha_e (dalpha_e - weighted) * LeakyReLU'(u_e).
      for (std::int64_t e = r.first; e < r.first + r.count; ++e) {
        const T du = alpha(e, k) * (dalpha[static_cast<size_t>(e - r.first)] - weighted) * leaky_grad(e, k);
        ddst(i, k) += du;
        dsrc(rows[static_cast<size_t>(e)], k) += du;
      }
    }
  }
  // The scores are linear in z and in a.
  for (std::int64_t k = 0; k < heads_; ++k) {
    const auto zk = z.middleCols(k * out_, out_);
    att_src_.grad.row(k) += dsrc.col(k).transpose() * zk;
    att_dst_.grad.row(k) += ddst.col(k).transpose() * zk.topRows(m);
    dz.middleCols(k * out_, out_) += dsrc.col(k) * att_src_.value.row(k);
    dz.topRows(m).middleCols(k * out_, out_) += ddst.col(k) * att_dst_.value.row(k);
  }
  weight_.grad.noalias() += x.transpose() * dz;
  return Matrix<T>(dz * weight_.value.transpose());
}

template class GatLayer<float>;
template class GatLayer<double>;

}  // namespace testbed::train
