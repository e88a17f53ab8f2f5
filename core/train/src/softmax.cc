#include "testbed/train/softmax.h"

namespace testbed::train {

template <typename T>
Matrix<T> SoftmaxRows(const Matrix<T>& x) {
  Matrix<T> y(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const T max = x.row(i).maxCoeff();
    y.row(i) = (x.row(i).array() - max).exp();
    y.row(i) /= y.row(i).sum();
  }
  return y;
}

template Matrix<float> SoftmaxRows<float>(const Matrix<float>&);
template Matrix<double> SoftmaxRows<double>(const Matrix<double>&);

}  // namespace testbed::train
