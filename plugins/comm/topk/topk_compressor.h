// The `topk` compressor, the usual sparsification baseline: each rank sends the k values of
// largest magnitude as (index, value) pairs, keeping what it did not send as an error-feedback
// residual added to its next gradient. Pairs from different ranks sit at different indices,
// so payloads are not mergeable: they travel by all-gather and every rank adds them up.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "testbed/compressor.h"

namespace testbed::topk {

struct TopKParams {
  std::int64_t k = 0;          // values sent per rank; 0: ceil(ratio * n)
  double ratio = 0.01;         // fraction of the gradient sent, used when k == 0
  bool error_feedback = true;  // keep unsent values for the next step
  std::int64_t elements = 0;   // gradient length; 0: fixed by the first Encode
  bool use_cuda = false;
};

class TopKCompressor final : public Compressor {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TopKCompressor>> Create(const TopKParams& params);

  [[nodiscard]] bool mergeable() const noexcept override { return false; }
  [[nodiscard]] absl::Status EncodeInto(std::span<const float> gradient, const EncodeContext& context,
                                        Payload& payload) override;
  [[nodiscard]] absl::Status Decode(std::span<const Payload> payloads, const DecodeOptions& options,
                                    std::span<float> out) override;
  // Exact for the wire (k pairs per rank); density does not matter to top-k.
  [[nodiscard]] absl::StatusOr<CompressionCost> Cost(const CompressionQuery& query) const override;

  // k for a gradient of `elements` values: in [1, elements].
  [[nodiscard]] std::int64_t KFor(std::int64_t elements) const noexcept;
  // The error-feedback residual: what this rank has not sent yet (empty before the first
  // Encode or without error feedback).
  [[nodiscard]] std::span<const float> residual() const noexcept { return residual_; }

 private:
  explicit TopKCompressor(const TopKParams& params) : params_(params) {}
  [[nodiscard]] absl::Status Bind(std::int64_t elements);

  TopKParams params_;
  std::int64_t elements_ = 0;  // 0 until bound
  std::int64_t k_ = 0;
  std::vector<float> residual_;
};

}  // namespace testbed::topk
