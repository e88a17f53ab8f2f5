// Single-direction LSTM (Hochreiter & Schmidhuber 1997, with the forget gate): the recurrent
// layer of the LSTM language models and of GNMT, the workloads that papers on communicating
// sparse embedding gradients train on.
//
//   [i f g o] = x W_ih + h_{t-1} W_hh + b,  i, f, o sigmoid, g tanh,
//   c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t).
//
// Gates are in PyTorch's nn.LSTM order, so its weights load directly: weight_ih and weight_hh
// are weight_ih_l0 and weight_hh_l0 transposed, and the one bias is b_ih + b_hh (two biases
// only ever enter as their sum).
//
// Rows are sequences of seq_len tokens laid end to end (Embedding's layout). Every sequence
// starts from h = c = 0 and no state is carried between sequences or batches: each sequence
// is a sample of its own, so micro-batches, replicas and recomputed caches stay independent
// and any schedule computes the same gradients as single-process training.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "testbed/train/layer.h"
#include "testbed/train/rng.h"

namespace testbed::train {

template <typename T>
class Lstm final : public Layer<T> {
 public:
  // Every parameter uniform in [-1/sqrt(hidden), 1/sqrt(hidden)], as PyTorch initialises.
  Lstm(const std::string& name, std::int64_t input_dim, std::int64_t hidden, std::int64_t seq_len, Rng& rng);

  [[nodiscard]] std::string kind() const override { return "lstm"; }
  // x: [sequences * seq_len, input_dim]; returns h_t for every row, [rows, hidden].
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  // Backpropagation through time over each whole sequence.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override { return {&weight_ih_, &weight_hh_, &bias_}; }
  // No quantised path: InvalidArgument for any width other than 32 bits.
  [[nodiscard]] absl::Status SetQuantization(const LayerQuant& q) override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<Lstm>(*this); }

  [[nodiscard]] std::int64_t input_dim() const noexcept { return weight_ih_.value.rows(); }
  [[nodiscard]] std::int64_t hidden() const noexcept { return weight_hh_.value.rows(); }
  [[nodiscard]] std::int64_t seq_len() const noexcept { return seq_len_; }
  [[nodiscard]] Param<T>& weight_ih() noexcept { return weight_ih_; }  // [input_dim, 4 hidden]
  [[nodiscard]] Param<T>& weight_hh() noexcept { return weight_hh_; }  // [hidden, 4 hidden]
  [[nodiscard]] Param<T>& bias() noexcept { return bias_; }            // [1, 4 hidden]

 private:
  std::string name_;
  std::int64_t seq_len_;
  Param<T> weight_ih_;
  Param<T> weight_hh_;
  Param<T> bias_;
};

}  // namespace testbed::train
