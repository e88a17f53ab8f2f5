#include "testbed/train/sgd.h"

namespace testbed::train {

template <typename T>
void Sgd<T>::Step(const std::vector<Param<T>*>& params) {
  const T lr = static_cast<T>(options_.learning_rate);
  const T mu = static_cast<T>(options_.momentum);
  const T wd = static_cast<T>(options_.weight_decay);
  for (Param<T>* p : params) {
    Matrix<T> step = p->grad;
    if (options_.weight_decay != 0) step += wd * p->value;
    if (options_.momentum != 0) {
      auto [it, fresh] = velocity_.try_emplace(p, Matrix<T>::Zero(p->value.rows(), p->value.cols()));
      it->second = mu * it->second + step;
      step = it->second;
    }
    p->value -= lr * step;
  }
}

template class Sgd<float>;
template class Sgd<double>;

}  // namespace testbed::train
