#include "testbed/train/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"
#include "testbed/train/softmax.h"

namespace testbed::train {

// Cache layout: tensors[0] gate probabilities [tokens, experts], tensors[1 + e] expert e's
// outputs (rows in the order its tokens were placed); indices[e] the tokens expert e kept,
// indices[experts] = {dropped, capacity}; children[e] expert e's {fc1, gelu, fc2} caches,
// children[experts] the gate's.

template <typename T>
std::vector<std::vector<int>> TopKChoices(const Matrix<T>& probs, int k) {
  const auto E = static_cast<int>(probs.cols());
  std::vector<std::vector<int>> choice(static_cast<size_t>(probs.rows()));
  for (Eigen::Index t = 0; t < probs.rows(); ++t) {
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs(t, a) > probs(t, b); });
    order.resize(static_cast<size_t>(k));
    choice[static_cast<size_t>(t)] = std::move(order);
  }
  return choice;
}

template <typename T>
Matrix<T> GateLogitGradient(const Matrix<T>& probs, const Matrix<T>& dprobs) {
  Matrix<T> dlogits = probs.cwiseProduct(dprobs);
  const Eigen::Matrix<T, Eigen::Dynamic, 1> dot = dlogits.rowwise().sum();
  dlogits -= probs.cwiseProduct(dot.replicate(1, probs.cols()));
  return dlogits;
}

template std::vector<std::vector<int>> TopKChoices(const Matrix<float>&, int);
template std::vector<std::vector<int>> TopKChoices(const Matrix<double>&, int);
template Matrix<float> GateLogitGradient(const Matrix<float>&, const Matrix<float>&);
template Matrix<double> GateLogitGradient(const Matrix<double>&, const Matrix<double>&);

template <typename T>
MoeLayer<T>::MoeLayer(const std::string& name, const MoeConfig& config, Rng& rng, double init_std)
    : config_(config), gate_(name + ".gate", config.dim, config.experts, false, rng, init_std) {
  for (int e = 0; e < config.experts; ++e) {
    const std::string en = absl::StrCat(name, ".expert", e);
    experts_.push_back(Expert{Linear<T>(en + ".fc1", config.dim, config.hidden, true, rng, init_std), Gelu<T>(),
                              Linear<T>(en + ".fc2", config.hidden, config.dim, true, rng, init_std)});
  }
}

template <typename T>
std::int64_t MoeLayer<T>::Capacity(std::int64_t tokens) const noexcept {
  if (config_.capacity_factor <= 0) return tokens * config_.top_k;
  return static_cast<std::int64_t>(
      std::ceil(config_.capacity_factor * config_.top_k * static_cast<double>(tokens) / config_.experts));
}

template <typename T>
absl::StatusOr<Matrix<T>> MoeLayer<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  const std::string& name = gate_.weight().name;
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "input", x.cols(), config_.dim));
  const int E = config_.experts;
  const int k = std::min(config_.top_k, E);
  const std::int64_t n = x.rows();
  cache.Clear();
  cache.children.resize(static_cast<size_t>(E) + 1);
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> logits, gate_.Forward(x, cache.children[static_cast<size_t>(E)]));
  Matrix<T> probs = SoftmaxRows(logits);

  const std::vector<std::vector<int>> choice = TopKChoices(probs, k);
  const std::int64_t capacity = Capacity(n);
  std::vector<std::vector<std::int64_t>> kept(static_cast<size_t>(E));
  std::int64_t dropped = 0;
  for (int c = 0; c < k; ++c) {
    for (std::int64_t t = 0; t < n; ++t) {
      auto& slot = kept[static_cast<size_t>(choice[static_cast<size_t>(t)][static_cast<size_t>(c)])];
      if (static_cast<std::int64_t>(slot.size()) < capacity) {
        slot.push_back(t);
      } else {
        ++dropped;
      }
    }
  }

  Matrix<T> y = Matrix<T>::Zero(n, config_.dim);
  cache.tensors.push_back(probs);
  for (int e = 0; e < E; ++e) {
    const auto& tokens = kept[static_cast<size_t>(e)];
    Matrix<T> in(static_cast<Eigen::Index>(tokens.size()), config_.dim);
    for (size_t r = 0; r < tokens.size(); ++r) in.row(static_cast<Eigen::Index>(r)) = x.row(tokens[r]);
    LayerCache<T>& ec = cache.children[static_cast<size_t>(e)];
    ec.children.resize(3);
    Expert& ex = experts_[static_cast<size_t>(e)];
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> u, ex.fc1.Forward(in, ec.children[0]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> g, ex.gelu.Forward(u, ec.children[1]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> out, ex.fc2.Forward(g, ec.children[2]));
    for (size_t r = 0; r < tokens.size(); ++r) {
      y.row(tokens[r]) += probs(tokens[r], e) * out.row(static_cast<Eigen::Index>(r));
    }
    cache.tensors.push_back(std::move(out));
    cache.indices.push_back(tokens);
  }
  cache.indices.push_back({dropped, capacity});
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> MoeLayer<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  const int E = config_.experts;
  const std::string& name = gate_.weight().name;
  TESTBED_RETURN_IF_ERROR(CheckCache(name, cache.tensors.size() == static_cast<size_t>(E) + 1 &&
                                               cache.children.size() == static_cast<size_t>(E) + 1));
  const Matrix<T>& probs = cache.tensors[0];
  TESTBED_RETURN_IF_ERROR(CheckRows(name, "output gradient", dy.rows(), probs.rows()));
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "output gradient", dy.cols(), config_.dim));
  Matrix<T> dx = Matrix<T>::Zero(dy.rows(), config_.dim);
  Matrix<T> dprobs = Matrix<T>::Zero(probs.rows(), probs.cols());
  for (int e = 0; e < E; ++e) {
    const auto& tokens = cache.indices[static_cast<size_t>(e)];
    const Matrix<T>& out = cache.tensors[static_cast<size_t>(e) + 1];
    Matrix<T> dout(static_cast<Eigen::Index>(tokens.size()), config_.dim);
    for (size_t r = 0; r < tokens.size(); ++r) {
      const auto row = static_cast<Eigen::Index>(r);
      dout.row(row) = probs(tokens[r], e) * dy.row(tokens[r]);
      dprobs(tokens[r], e) = dy.row(tokens[r]).dot(out.row(row));
    }
    const LayerCache<T>& ec = cache.children[static_cast<size_t>(e)];
    Expert& ex = experts_[static_cast<size_t>(e)];
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> dg, ex.fc2.Backward(dout, ec.children[2]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> du, ex.gelu.Backward(dg, ec.children[1]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> din, ex.fc1.Backward(du, ec.children[0]));
    for (size_t r = 0; r < tokens.size(); ++r) dx.row(tokens[r]) += din.row(static_cast<Eigen::Index>(r));
  }
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dgate,
                           gate_.Backward(GateLogitGradient(probs, dprobs), cache.children[static_cast<size_t>(E)]));
  dx += dgate;
  return dx;
}

template <typename T>
std::vector<Param<T>*> MoeLayer<T>::Params() {
  std::vector<Param<T>*> p = gate_.Params();
  for (Expert& ex : experts_) {
    for (Param<T>* q : ex.fc1.Params()) p.push_back(q);
    for (Param<T>* q : ex.fc2.Params()) p.push_back(q);
  }
  return p;
}

template <typename T>
MoeRouting MoeLayer<T>::Routing(const LayerCache<T>& cache) const {
  MoeRouting r;
  const auto E = static_cast<size_t>(config_.experts);
  if (cache.indices.size() != E + 1) return r;
  for (size_t e = 0; e < E; ++e) r.tokens_per_expert.push_back(static_cast<std::int64_t>(cache.indices[e].size()));
  r.dropped = cache.indices[E][0];
  r.capacity = cache.indices[E][1];
  return r;
}

template class MoeLayer<float>;
template class MoeLayer<double>;

}  // namespace testbed::train
