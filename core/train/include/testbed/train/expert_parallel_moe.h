// A mixture-of-experts layer run with expert parallelism: each of `size` ranks gates its own
// tokens, sends each token to a rank holding its expert (the owner, or a copy: a token stays
// where its expert has a copy, else goes round-robin over the expert's holders), the holders
// compute their experts on every token they received, and the outputs come back the same way
// (two all-to-all-v exchanges forward, two backward). Dropless only (a capacity is defined on
// the whole batch, which no rank sees). Every rank keeps the whole layer's weights in the
// same order as MoeLayer's, so that averaging every parameter's gradient over the ranks gives
// each expert the gradient of all the tokens it computed: over the ranks that hold it, the
// same as a single process training on all the ranks' tokens.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/gelu.h"
#include "testbed/train/linear.h"
#include "testbed/train/moe_layer.h"

namespace testbed::train {

// Sends send[d] (rows) to rank d of the group and returns what each rank s sent this one,
// recv[s]. Every rank calls it the same number of times in the same order (an executor binds
// it to the communicator's all-to-all-v).
template <typename T>
using RowExchangeFn = std::function<absl::StatusOr<std::vector<Matrix<T>>>(const std::vector<Matrix<T>>& send)>;

// Where the experts are: per expert its owner rank and the other ranks holding copies.
struct ExpertHolders {
  std::vector<int> owner;
  std::vector<std::vector<int>> copies;
};

template <typename T>
class ExpertParallelMoe final : public Layer<T> {
 public:
  // Rank `rank` of `size` of `full` (same weights). InvalidArgument for a capacity factor
  // (dropless only) or holders that do not fit (FailedPrecondition without an exchange).
  [[nodiscard]] static absl::StatusOr<ExpertParallelMoe> Create(const MoeLayer<T>& full, int rank, int size,
                                                                ExpertHolders holders, RowExchangeFn<T> exchange);
  // New holders from the next Forward on (a balancer's placement for the next iteration).
  [[nodiscard]] absl::Status SetHolders(ExpertHolders holders);

  [[nodiscard]] std::string kind() const override { return "moe_expert_parallel"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  // As MoeLayer: gate weight, then each expert's fc1 weight and bias, fc2 weight and bias.
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<ExpertParallelMoe>(*this); }

  // Tokens this rank's gate sent each expert in the Forward that filled `cache`.
  [[nodiscard]] std::vector<std::int64_t> TokensPerExpert(const LayerCache<T>& cache) const;
  // Tokens each expert computed here in that Forward (0 for experts not held).
  [[nodiscard]] std::vector<std::int64_t> ComputedPerExpert(const LayerCache<T>& cache) const;
  [[nodiscard]] const MoeConfig& config() const noexcept { return config_; }
  [[nodiscard]] bool Holds(int expert) const;

 private:
  struct Expert {
    Linear<T> fc1;
    Gelu<T> gelu;
    Linear<T> fc2;
  };
  ExpertParallelMoe(MoeConfig config, int rank, int size, Linear<T> gate, std::vector<Expert> experts,
                    RowExchangeFn<T> exchange)
      : config_(config), rank_(rank), size_(size), gate_(std::move(gate)), experts_(std::move(experts)),
        exchange_(std::move(exchange)) {}
  [[nodiscard]] absl::StatusOr<std::vector<Matrix<T>>> Exchange(const std::vector<Matrix<T>>& send) const;

  MoeConfig config_;
  int rank_ = 0, size_ = 1;
  ExpertHolders holders_;
  Linear<T> gate_;
  std::vector<Expert> experts_;
  RowExchangeFn<T> exchange_;
};

}  // namespace testbed::train
