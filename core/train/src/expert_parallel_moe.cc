#include "testbed/train/expert_parallel_moe.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"
#include "testbed/train/softmax.h"

namespace testbed::train {

// Cache layout (E experts, R ranks): tensors[0] gate probabilities [tokens, E], tensors[1 + d]
// the expert outputs returned by rank d for the assignments sent to it; indices[d] the
// assignments sent to rank d as (token, expert) pairs, indices[R + s] {rows received from
// rank s}, indices[2R + e] the rows expert e computed here as (source, row) pairs;
// children[e] expert e's {fc1, gelu, fc2} caches, children[E] the gate's.

template <typename T>
absl::StatusOr<ExpertParallelMoe<T>> ExpertParallelMoe<T>::Create(const MoeLayer<T>& full, int rank, int size,
                                                                  ExpertHolders holders, RowExchangeFn<T> exchange) {
  const MoeConfig& c = full.config();
  if (c.capacity_factor > 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert parallelism runs dropless MoE layers; this one has capacity "
                                                   "factor ", c.capacity_factor, " (set it to 0)"));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("expert-parallel rank ", rank, " of ", size));
  }
  MoeLayer<T> copy(full);
  std::vector<Param<T>*> p = copy.Params();
  // Parameter names end in ".weight" / ".bias"; the layers take the stem.
  const auto stem = [](const std::string& n) { return n.substr(0, n.size() - std::string(".weight").size()); };
  const auto dense = [&](const Param<T>& w, const Param<T>& b) { return Linear<T>(stem(w.name), w.value, Matrix<T>(b.value)); };
  Linear<T> gate(stem(p[0]->name), p[0]->value, std::nullopt);
  std::vector<Expert> experts;
  for (int e = 0; e < c.experts; ++e) {
    const size_t at = 1 + 4 * static_cast<size_t>(e);
    experts.push_back(Expert{dense(*p[at], *p[at + 1]), Gelu<T>(), dense(*p[at + 2], *p[at + 3])});
  }
  ExpertParallelMoe layer(c, rank, size, std::move(gate), std::move(experts), std::move(exchange));
  TESTBED_RETURN_IF_ERROR(layer.SetHolders(std::move(holders)));
  return layer;
}

template <typename T>
absl::Status ExpertParallelMoe<T>::SetHolders(ExpertHolders h) {
  const int E = config_.experts;
  if (static_cast<int>(h.owner.size()) != E || static_cast<int>(h.copies.size()) != E) {
    return absl::InvalidArgumentError(absl::StrCat(gate_.weight().name, ": holders for ", h.owner.size(), " of ", E,
                                                   " experts"));
  }
  for (int e = 0; e < E; ++e) {
    auto bad = [&](int r) { return r < 0 || r >= size_; };
    if (bad(h.owner[static_cast<size_t>(e)])) {
      return absl::InvalidArgumentError(absl::StrCat(gate_.weight().name, ": expert ", e, " owned by rank ",
                                                     h.owner[static_cast<size_t>(e)], " of ", size_));
    }
    auto& cs = h.copies[static_cast<size_t>(e)];
    std::sort(cs.begin(), cs.end());
    for (size_t i = 0; i < cs.size(); ++i) {
      if (bad(cs[i]) || cs[i] == h.owner[static_cast<size_t>(e)] || (i > 0 && cs[i] == cs[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(gate_.weight().name, ": expert ", e, " has a copy on rank ",
                                                       cs[i], "; copies go on distinct ranks other than the owner"));
      }
    }
  }
  holders_ = std::move(h);
  return absl::OkStatus();
}

template <typename T>
bool ExpertParallelMoe<T>::Holds(int e) const {
  const auto& cs = holders_.copies[static_cast<size_t>(e)];
  return holders_.owner[static_cast<size_t>(e)] == rank_ || std::binary_search(cs.begin(), cs.end(), rank_);
}

template <typename T>
absl::StatusOr<std::vector<Matrix<T>>> ExpertParallelMoe<T>::Exchange(const std::vector<Matrix<T>>& send) const {
  if (size_ == 1) return send;
  if (!exchange_) return absl::FailedPreconditionError(absl::StrCat(gate_.weight().name, ": expert parallelism needs an exchange"));
  TESTBED_ASSIGN_OR_RETURN(std::vector<Matrix<T>> recv, exchange_(send));
  if (static_cast<int>(recv.size()) != size_) {
    return absl::InternalError(absl::StrCat(gate_.weight().name, ": the exchange returned ", recv.size(), " parts for ",
                                            size_, " ranks"));
  }
  return recv;
}

template <typename T>
absl::StatusOr<Matrix<T>> ExpertParallelMoe<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  const std::string& name = gate_.weight().name;
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "input", x.cols(), config_.dim));
  const int E = config_.experts, R = size_;
  const int k = std::min(config_.top_k, E);
  const std::int64_t n = x.rows();
  const Eigen::Index dim = static_cast<Eigen::Index>(config_.dim);
  cache.Clear();
  cache.children.resize(static_cast<size_t>(E) + 1);
  cache.indices.resize(2 * static_cast<size_t>(R) + static_cast<size_t>(E));
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> logits, gate_.Forward(x, cache.children[static_cast<size_t>(E)]));
  Matrix<T> probs = SoftmaxRows(logits);
  // Assignments in MoeLayer's order: every token's first choice, then every second choice.
  const std::vector<std::vector<int>> choice = TopKChoices(probs, k);
  std::vector<std::int64_t> round_robin(static_cast<size_t>(E), 0);
  for (int c = 0; c < k; ++c) {
    for (std::int64_t t = 0; t < n; ++t) {
      const int e = choice[static_cast<size_t>(t)][static_cast<size_t>(c)];
      int dst = rank_;
      if (!Holds(e)) {
        const auto& cs = holders_.copies[static_cast<size_t>(e)];
        const std::int64_t i = round_robin[static_cast<size_t>(e)]++ % static_cast<std::int64_t>(1 + cs.size());
        dst = i == 0 ? holders_.owner[static_cast<size_t>(e)] : cs[static_cast<size_t>(i - 1)];
      }
      auto& a = cache.indices[static_cast<size_t>(dst)];
      a.push_back(t);
      a.push_back(e);
    }
  }
  std::vector<Matrix<T>> send(static_cast<size_t>(R));
  for (int d = 0; d < R; ++d) {
    const auto& a = cache.indices[static_cast<size_t>(d)];
    Matrix<T>& m = send[static_cast<size_t>(d)];
    m.resize(static_cast<Eigen::Index>(a.size() / 2), dim + 1);
    for (size_t i = 0; i < a.size() / 2; ++i) {
      m.row(static_cast<Eigen::Index>(i)).head(dim) = x.row(a[2 * i]);
      m(static_cast<Eigen::Index>(i), dim) = static_cast<T>(a[2 * i + 1]);
    }
  }
  TESTBED_ASSIGN_OR_RETURN(std::vector<Matrix<T>> recv, Exchange(send));
  // Every row received goes to its expert, in source then row order.
  std::vector<Matrix<T>> back(static_cast<size_t>(R));
  for (int s = 0; s < R; ++s) {
    const Matrix<T>& m = recv[static_cast<size_t>(s)];
    if (m.rows() > 0 && m.cols() != dim + 1) {
      return absl::InternalError(absl::StrCat(name, ": rank ", s, " sent rows of ", m.cols(), " values, not ", dim + 1));
    }
    cache.indices[static_cast<size_t>(R + s)] = {static_cast<std::int64_t>(m.rows())};
    back[static_cast<size_t>(s)] = Matrix<T>::Zero(m.rows(), dim);
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
      const auto e = static_cast<std::int64_t>(m(r, dim));
      if (e < 0 || e >= E || !Holds(static_cast<int>(e))) {
        return absl::InternalError(absl::StrCat(name, ": rank ", s, " sent a token for expert ", e, ", not held by rank ", rank_));
      }
      auto& g = cache.indices[static_cast<size_t>(2 * R + e)];
      g.push_back(s);
      g.push_back(r);
    }
  }
  for (int e = 0; e < E; ++e) {
    const auto& g = cache.indices[static_cast<size_t>(2 * R + e)];
    if (g.empty()) continue;
    Matrix<T> in(static_cast<Eigen::Index>(g.size() / 2), dim);
    for (size_t i = 0; i < g.size() / 2; ++i) {
      in.row(static_cast<Eigen::Index>(i)) = recv[static_cast<size_t>(g[2 * i])].row(g[2 * i + 1]).head(dim);
    }
    LayerCache<T>& ec = cache.children[static_cast<size_t>(e)];
    ec.children.resize(3);
    Expert& ex = experts_[static_cast<size_t>(e)];
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> u, ex.fc1.Forward(in, ec.children[0]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> gl, ex.gelu.Forward(u, ec.children[1]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> out, ex.fc2.Forward(gl, ec.children[2]));
    for (size_t i = 0; i < g.size() / 2; ++i) back[static_cast<size_t>(g[2 * i])].row(g[2 * i + 1]) = out.row(static_cast<Eigen::Index>(i));
  }
  TESTBED_ASSIGN_OR_RETURN(std::vector<Matrix<T>> ret, Exchange(back));
  Matrix<T> y = Matrix<T>::Zero(n, dim);
  cache.tensors.push_back(probs);
  for (int d = 0; d < R; ++d) {
    const auto& a = cache.indices[static_cast<size_t>(d)];
    const Matrix<T>& out = ret[static_cast<size_t>(d)];
    if (out.rows() != static_cast<Eigen::Index>(a.size() / 2)) {
      return absl::InternalError(absl::StrCat(name, ": rank ", d, " returned ", out.rows(), " outputs for ", a.size() / 2,
                                              " tokens"));
    }
    for (size_t i = 0; i < a.size() / 2; ++i) y.row(a[2 * i]) += probs(a[2 * i], a[2 * i + 1]) * out.row(static_cast<Eigen::Index>(i));
    cache.tensors.push_back(out);
  }
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> ExpertParallelMoe<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  const int E = config_.experts, R = size_;
  const std::string& name = gate_.weight().name;
  const Eigen::Index dim = static_cast<Eigen::Index>(config_.dim);
  TESTBED_RETURN_IF_ERROR(CheckCache(name, cache.tensors.size() == static_cast<size_t>(R) + 1 &&
                                               cache.children.size() == static_cast<size_t>(E) + 1 &&
                                               cache.indices.size() == 2 * static_cast<size_t>(R) + static_cast<size_t>(E)));
  const Matrix<T>& probs = cache.tensors[0];
  TESTBED_RETURN_IF_ERROR(CheckRows(name, "output gradient", dy.rows(), probs.rows()));
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "output gradient", dy.cols(), config_.dim));
  Matrix<T> dprobs = Matrix<T>::Zero(probs.rows(), probs.cols());
  std::vector<Matrix<T>> dsend(static_cast<size_t>(R));
  for (int d = 0; d < R; ++d) {
    const auto& a = cache.indices[static_cast<size_t>(d)];
    const Matrix<T>& out = cache.tensors[static_cast<size_t>(d) + 1];
    Matrix<T>& m = dsend[static_cast<size_t>(d)];
    m.resize(static_cast<Eigen::Index>(a.size() / 2), dim);
    for (size_t i = 0; i < a.size() / 2; ++i) {
      const auto row = static_cast<Eigen::Index>(i);
      m.row(row) = probs(a[2 * i], a[2 * i + 1]) * dy.row(a[2 * i]);
      dprobs(a[2 * i], a[2 * i + 1]) = dy.row(a[2 * i]).dot(out.row(row));
    }
  }
  TESTBED_ASSIGN_OR_RETURN(std::vector<Matrix<T>> drecv, Exchange(dsend));
  std::vector<Matrix<T>> dback(static_cast<size_t>(R));
  for (int s = 0; s < R; ++s) {
    const std::int64_t rows = cache.indices[static_cast<size_t>(R + s)].front();
    if (drecv[static_cast<size_t>(s)].rows() != rows) {
      return absl::InternalError(absl::StrCat(name, ": rank ", s, " sent ", drecv[static_cast<size_t>(s)].rows(),
                                              " output gradients for ", rows, " tokens"));
    }
    dback[static_cast<size_t>(s)] = Matrix<T>::Zero(rows, dim);
  }
  for (int e = 0; e < E; ++e) {
    const auto& g = cache.indices[static_cast<size_t>(2 * R + e)];
    if (g.empty()) continue;
    Matrix<T> dout(static_cast<Eigen::Index>(g.size() / 2), dim);
    for (size_t i = 0; i < g.size() / 2; ++i) dout.row(static_cast<Eigen::Index>(i)) = drecv[static_cast<size_t>(g[2 * i])].row(g[2 * i + 1]);
    const LayerCache<T>& ec = cache.children[static_cast<size_t>(e)];
    Expert& ex = experts_[static_cast<size_t>(e)];
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> dgl, ex.fc2.Backward(dout, ec.children[2]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> du, ex.gelu.Backward(dgl, ec.children[1]));
    TESTBED_ASSIGN_OR_RETURN(Matrix<T> din, ex.fc1.Backward(du, ec.children[0]));
    for (size_t i = 0; i < g.size() / 2; ++i) dback[static_cast<size_t>(g[2 * i])].row(g[2 * i + 1]) = din.row(static_cast<Eigen::Index>(i));
  }
  TESTBED_ASSIGN_OR_RETURN(std::vector<Matrix<T>> dret, Exchange(dback));
  Matrix<T> dx = Matrix<T>::Zero(dy.rows(), dim);
  for (int d = 0; d < R; ++d) {
    const auto& a = cache.indices[static_cast<size_t>(d)];
    for (size_t i = 0; i < a.size() / 2; ++i) dx.row(a[2 * i]) += dret[static_cast<size_t>(d)].row(static_cast<Eigen::Index>(i));
  }
  TESTBED_ASSIGN_OR_RETURN(Matrix<T> dgate,
                           gate_.Backward(GateLogitGradient(probs, dprobs), cache.children[static_cast<size_t>(E)]));
  dx += dgate;
  return dx;
}

template <typename T>
std::vector<Param<T>*> ExpertParallelMoe<T>::Params() {
  std::vector<Param<T>*> p = gate_.Params();
  for (Expert& ex : experts_) {
    for (Param<T>* q : ex.fc1.Params()) p.push_back(q);
    for (Param<T>* q : ex.fc2.Params()) p.push_back(q);
  }
  return p;
}

template <typename T>
std::vector<std::int64_t> ExpertParallelMoe<T>::TokensPerExpert(const LayerCache<T>& cache) const {
  std::vector<std::int64_t> n(static_cast<size_t>(config_.experts), 0);
  for (int d = 0; d < size_ && static_cast<size_t>(d) < cache.indices.size(); ++d) {
    const auto& a = cache.indices[static_cast<size_t>(d)];
    for (size_t i = 1; i < a.size(); i += 2) ++n[static_cast<size_t>(a[i])];
  }
  return n;
}

template <typename T>
std::vector<std::int64_t> ExpertParallelMoe<T>::ComputedPerExpert(const LayerCache<T>& cache) const {
  std::vector<std::int64_t> n(static_cast<size_t>(config_.experts), 0);
  for (int e = 0; e < config_.experts; ++e) {
    const size_t at = 2 * static_cast<size_t>(size_) + static_cast<size_t>(e);
    if (at < cache.indices.size()) n[static_cast<size_t>(e)] = static_cast<std::int64_t>(cache.indices[at].size() / 2);
  }
  return n;
}

template class ExpertParallelMoe<float>;
template class ExpertParallelMoe<double>;

}  // namespace testbed::train
