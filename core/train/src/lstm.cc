#include "testbed/train/lstm.h"

#include <cmath>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"
#include "testbed/train/gemm.h"

namespace testbed::train {
namespace {

// c = op(a) op(b), or c += op(a) op(b), with at most one operand transposed. Float goes
// through the thread's GEMM backend like Linear's products; double (gradient checks) is Eigen.
template <typename T>
absl::Status Product(const Matrix<T>& a, bool transpose_a, const Matrix<T>& b, bool transpose_b, bool accumulate,
                     Matrix<T>& c) {
  if constexpr (std::is_same_v<T, float>) {
    return ThreadGemm().Gemm(a, transpose_a, b, transpose_b, accumulate ? 1.0f : 0.0f, c);
  } else {
    auto product = [&](auto&& lhs, auto&& rhs) {
      if (accumulate) c.noalias() += lhs * rhs;
      else c.noalias() = lhs * rhs;
    };
    if (transpose_a) product(a.transpose(), b);
    else if (transpose_b) product(a, b.transpose());
    else product(a, b);
    return absl::OkStatus();
  }
}

// The rows of time step t of every sequence (rows t, t + seq_len, ...), as a strided view, so
// a step runs on all sequences at once without copying them out.
template <typename M>
Eigen::Map<M, 0, Eigen::OuterStride<>> StepRows(M& m, std::int64_t seq_len, std::int64_t t) {
  return Eigen::Map<M, 0, Eigen::OuterStride<>>(m.size() == 0 ? m.data() : m.data() + t * m.cols(),
                                                m.rows() / seq_len, m.cols(), Eigen::OuterStride<>(seq_len * m.cols()));
}

template <typename Block>
void SigmoidInPlace(Block&& b) {
  using T = typename std::decay_t<Block>::Scalar;
  b.array() = (T(1) + (-b.array()).exp()).inverse();
}

}  // namespace

template <typename T>
Lstm<T>::Lstm(const std::string& name, std::int64_t input_dim, std::int64_t hidden, std::int64_t seq_len, Rng& rng)
    : name_(name), seq_len_(seq_len) {
  const double limit = 1.0 / std::sqrt(static_cast<double>(hidden));
  auto uniform = [&](std::int64_t rows, std::int64_t cols) {
    Matrix<T> m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>((2 * rng.Uniform() - 1) * limit);
    return m;
  };
  weight_ih_ = Param<T>(name + ".weight_ih", uniform(input_dim, 4 * hidden));
  weight_hh_ = Param<T>(name + ".weight_hh", uniform(hidden, 4 * hidden));
  bias_ = Param<T>(name + ".bias", uniform(1, 4 * hidden));
}

template <typename T>
absl::Status Lstm<T>::SetQuantization(const LayerQuant& q) {
  if (q.full_precision()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name_, ": an LSTM has no quantised path (weight, activation, gradient ",
                                                 q.weight_bits, ", ", q.activation_bits, ", ", q.gradient_bits,
                                                 " bits asked for; only 32)"));
}

template <typename T>
absl::StatusOr<Matrix<T>> Lstm<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "input", x.cols(), input_dim()));
  if (seq_len_ < 1 || x.rows() % seq_len_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", x.rows(), " rows is not a whole number of sequences of ", seq_len_));
  }
  const Eigen::Index hid = hidden(), rows = x.rows();
  // The input's share of every gate in one product; the steps add h_{t-1} W_hh and then
  // overwrite it with the activated gates, which is what Backward needs.
  Matrix<T> gates;
  TESTBED_RETURN_IF_ERROR(Product(x, false, weight_ih_.value, false, false, gates));
  gates.rowwise() += bias_.value.row(0);
  Matrix<T> cells(rows, hid), tanh_cells(rows, hid), h_prev(rows, hid), y(rows, hid);
  Matrix<T> h = Matrix<T>::Zero(rows / seq_len_, hid), c = h, recurrent;
  for (std::int64_t t = 0; t < seq_len_; ++t) {
    StepRows(h_prev, seq_len_, t) = h;
    auto a = StepRows(gates, seq_len_, t);
    TESTBED_RETURN_IF_ERROR(Product(h, false, weight_hh_.value, false, false, recurrent));
    a += recurrent;
    SigmoidInPlace(a.leftCols(2 * hid));  // i, f
    a.middleCols(2 * hid, hid).array() = a.middleCols(2 * hid, hid).array().tanh();
    SigmoidInPlace(a.rightCols(hid));  // o
    c = a.middleCols(hid, hid).cwiseProduct(c) + a.leftCols(hid).cwiseProduct(a.middleCols(2 * hid, hid));
    StepRows(cells, seq_len_, t) = c;
    auto tanh_c = StepRows(tanh_cells, seq_len_, t);
    tanh_c = c.array().tanh().matrix();
    h = a.rightCols(hid).cwiseProduct(tanh_c);
    StepRows(y, seq_len_, t) = h;
  }
  cache.Clear();
  cache.tensors = {x, std::move(gates), std::move(cells), std::move(tanh_cells), std::move(h_prev)};
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> Lstm<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCache(name_, cache.tensors.size() == 5));
  const Matrix<T>& x = cache.tensors[0];
  const Matrix<T>& gates = cache.tensors[1];
  const Matrix<T>& cells = cache.tensors[2];
  const Matrix<T>& tanh_cells = cache.tensors[3];
  const Matrix<T>& h_prev = cache.tensors[4];
  const Eigen::Index hid = hidden();
  TESTBED_RETURN_IF_ERROR(CheckRows(name_, "output gradient", dy.rows(), x.rows()));
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "output gradient", dy.cols(), hid));
  const Eigen::Index n = x.rows() / seq_len_;
  // Only the recurrence is sequential: the gradients of the gate pre-activations are
  // gathered for every row, and the parameters' gradients and dx are then one product each.
  Matrix<T> dpre(x.rows(), 4 * hid), step(n, 4 * hid);
  Matrix<T> dh_recurrent = Matrix<T>::Zero(n, hid), dc = dh_recurrent;  // both from step t + 1
  for (std::int64_t t = seq_len_ - 1; t >= 0; --t) {
    const auto a = StepRows(gates, seq_len_, t);
    const auto i = a.leftCols(hid).array(), f = a.middleCols(hid, hid).array();
    const auto g = a.middleCols(2 * hid, hid).array(), o = a.rightCols(hid).array();
    const auto tanh_c_rows = StepRows(tanh_cells, seq_len_, t);
    const auto tanh_c = tanh_c_rows.array();
    const Matrix<T> dh = StepRows(dy, seq_len_, t) + dh_recurrent;
    dc.array() += dh.array() * o * (T(1) - tanh_c.square());
    step.leftCols(hid).array() = dc.array() * g * i * (T(1) - i);
    if (t > 0) {
      step.middleCols(hid, hid).array() = dc.array() * StepRows(cells, seq_len_, t - 1).array() * f * (T(1) - f);
    } else {
      step.middleCols(hid, hid).setZero();  // c_{-1} = 0
    }
    step.middleCols(2 * hid, hid).array() = dc.array() * i * (T(1) - g.square());
    step.rightCols(hid).array() = dh.array() * tanh_c * o * (T(1) - o);
    dc.array() *= f;
    StepRows(dpre, seq_len_, t) = step;
    if (t > 0) TESTBED_RETURN_IF_ERROR(Product(step, false, weight_hh_.value, true, false, dh_recurrent));
  }
  bias_.grad.row(0) += dpre.colwise().sum();
  TESTBED_RETURN_IF_ERROR(Product(x, true, dpre, false, true, weight_ih_.grad));
  TESTBED_RETURN_IF_ERROR(Product(h_prev, true, dpre, false, true, weight_hh_.grad));
  Matrix<T> dx;
  TESTBED_RETURN_IF_ERROR(Product(dpre, false, weight_ih_.value, true, false, dx));
  return dx;
}

template class Lstm<float>;
template class Lstm<double>;

}  // namespace testbed::train
