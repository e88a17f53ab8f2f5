#include "testbed/train/sequential_model.h"

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
SequentialModel<T>::SequentialModel(const SequentialModel& other) {
  for (const auto& l : other.layers_) layers_.push_back(l->Clone());
}

template <typename T>
SequentialModel<T>& SequentialModel<T>::operator=(const SequentialModel& other) {
  if (this != &other) {
    layers_.clear();
    for (const auto& l : other.layers_) layers_.push_back(l->Clone());
  }
  return *this;
}

template <typename T>
absl::StatusOr<Matrix<T>> SequentialModel<T>::ForwardRange(int begin, int end, const Matrix<T>& x,
                                                           std::vector<LayerCache<T>>& caches) {
  if (begin < 0 || end > num_layers() || begin > end) {
    return absl::InvalidArgumentError(absl::StrCat("layer range [", begin, ", ", end, ") outside [0, ", num_layers(), ")"));
  }
  caches.resize(static_cast<size_t>(end - begin));
  Matrix<T> h = x;
  for (int i = begin; i < end; ++i) {
    TESTBED_ASSIGN_OR_RETURN(h, layers_[static_cast<size_t>(i)]->Forward(h, caches[static_cast<size_t>(i - begin)]));
  }
  return h;
}

template <typename T>
absl::StatusOr<Matrix<T>> SequentialModel<T>::BackwardRange(int begin, int end, const Matrix<T>& dy,
                                                            const std::vector<LayerCache<T>>& caches) {
  if (begin < 0 || end > num_layers() || begin > end || caches.size() != static_cast<size_t>(end - begin)) {
    return absl::InvalidArgumentError(absl::StrCat("backward over layers [", begin, ", ", end, ") with ", caches.size(),
                                                   " caches"));
  }
  Matrix<T> d = dy;
  for (int i = end - 1; i >= begin; --i) {
    TESTBED_ASSIGN_OR_RETURN(d, layers_[static_cast<size_t>(i)]->Backward(d, caches[static_cast<size_t>(i - begin)]));
  }
  return d;
}

template <typename T>
std::vector<Param<T>*> SequentialModel<T>::ParamsOfLayers(int begin, int end) {
  std::vector<Param<T>*> out;
  for (int i = begin; i < end; ++i) {
    for (Param<T>* p : layers_[static_cast<size_t>(i)]->Params()) out.push_back(p);
  }
  return out;
}

template <typename T>
void SequentialModel<T>::ZeroGrad() {
  for (Param<T>* p : Params()) p->ZeroGrad();
}

template <typename T>
std::int64_t SequentialModel<T>::NumParameters() {
  std::int64_t n = 0;
  for (Param<T>* p : Params()) n += p->size();
  return n;
}

template class SequentialModel<float>;
template class SequentialModel<double>;

}  // namespace testbed::train
