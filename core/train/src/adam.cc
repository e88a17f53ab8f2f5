#include "testbed/train/adam.h"

#include <cmath>

namespace testbed::train {

template <typename T>
void Adam<T>::Step(const std::vector<Param<T>*>& params) {
  const double b1 = options_.beta1, b2 = options_.beta2;
  for (Param<T>* p : params) {
    auto [it, fresh] = state_.try_emplace(p);
    State& s = it->second;
    if (fresh) {
      s.m = Matrix<T>::Zero(p->value.rows(), p->value.cols());
      s.v = Matrix<T>::Zero(p->value.rows(), p->value.cols());
    }
    ++s.steps;
    s.m = static_cast<T>(b1) * s.m + static_cast<T>(1 - b1) * p->grad;
    s.v = static_cast<T>(b2) * s.v + static_cast<T>(1 - b2) * p->grad.cwiseProduct(p->grad);
    const auto c1 = static_cast<T>(1 - std::pow(b1, static_cast<double>(s.steps)));
    const auto c2 = static_cast<T>(1 - std::pow(b2, static_cast<double>(s.steps)));
    const auto lr = static_cast<T>(options_.learning_rate);
    const auto eps = static_cast<T>(options_.eps);
    p->value.array() -= lr * ((s.m.array() / c1) / ((s.v.array() / c2).sqrt() + eps));
    if (options_.weight_decay != 0) p->value -= lr * static_cast<T>(options_.weight_decay) * p->value;
  }
}

template class Adam<float>;
template class Adam<double>;

}  // namespace testbed::train
