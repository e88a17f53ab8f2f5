// Finite-difference gradient checks for the training engine, in double precision. The
// loss is L = sum(y .* R) for a fixed random R, so dL/dy = R; the analytic gradients that
// Backward produces (for the input and every parameter) are compared with central
// differences (L(w + e) - L(w - e)) / 2e, element by element.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testbed/train/layer.h"
#include "testbed/train/rng.h"

namespace testbed::train::testing {

using ForwardFn = std::function<absl::StatusOr<Matrix<double>>(const Matrix<double>&, LayerCache<double>&)>;
using BackwardFn = std::function<absl::StatusOr<Matrix<double>>(const Matrix<double>&, const LayerCache<double>&)>;

inline Matrix<double> RandomMatrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  Matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = rng.Normal() * scale;
  return m;
}

// |analytic - numeric| <= atol + rtol * |numeric|.
inline void ExpectClose(double analytic, double numeric, const std::string& what) {
  const double atol = 1e-7, rtol = 1e-5;
  EXPECT_LE(std::abs(analytic - numeric), atol + rtol * std::abs(numeric))
      << what << ": backward gives " << analytic << ", finite differences " << numeric;
}

inline void CheckGradients(const ForwardFn& forward, const BackwardFn& backward, const std::vector<Param<double>*>& params,
                           Matrix<double> x, bool check_input, std::uint64_t seed = 99) {
  constexpr double kEps = 1e-6;
  LayerCache<double> cache;
  auto y = forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  const Matrix<double> r = RandomMatrix(y->rows(), y->cols(), seed);
  for (Param<double>* p : params) p->ZeroGrad();
  auto dx = backward(r, cache);
  ASSERT_TRUE(dx.ok()) << dx.status();
  auto loss = [&](const Matrix<double>& input) {
    LayerCache<double> c;
    auto out = forward(input, c);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->cwiseProduct(r).sum() : 0.0;
  };
  if (check_input) {
    ASSERT_EQ(dx->rows(), x.rows());
    ASSERT_EQ(dx->cols(), x.cols());
    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const double keep = x.data()[i];
      x.data()[i] = keep + kEps;
      const double up = loss(x);
      x.data()[i] = keep - kEps;
      const double down = loss(x);
      x.data()[i] = keep;
      ExpectClose(dx->data()[i], (up - down) / (2 * kEps), "input element " + std::to_string(i));
    }
  }
  for (Param<double>* p : params) {
    const Matrix<double> analytic = p->grad;
    for (Eigen::Index i = 0; i < p->value.size(); ++i) {
      const double keep = p->value.data()[i];
      p->value.data()[i] = keep + kEps;
      const double up = loss(x);
      p->value.data()[i] = keep - kEps;
      const double down = loss(x);
      p->value.data()[i] = keep;
      ExpectClose(analytic.data()[i], (up - down) / (2 * kEps), p->name + " element " + std::to_string(i));
    }
  }
}

inline void CheckLayerGradients(Layer<double>& layer, const Matrix<double>& x, bool check_input = true) {
  CheckGradients([&](const Matrix<double>& in, LayerCache<double>& c) { return layer.Forward(in, c); },
                 [&](const Matrix<double>& dy, const LayerCache<double>& c) { return layer.Backward(dy, c); },
                 layer.Params(), x, check_input);
}

}  // namespace testbed::train::testing
