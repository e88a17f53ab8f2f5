// The `casq` compressor (Cluster-Aware Sketch Quantization): each rank clusters its gradient's
// value distribution, shares 2^bits quantisation buckets among the clusters by their
// statistics, and sends every value (or every non-zero, located by a bitmap) as a bits-wide
// code of an unbiased stochastic rounding to the codebook. Codebooks differ between ranks, so
// payloads are not mergeable: they travel by all-gather and every rank decodes all of them.
#pragma once

#include <cstdint>
#include <memory>

#include "encoded_rank.h"
#include "testbed/compressor.h"

namespace testbed::casq {

struct CasqParams {
  int bits = 2;
  int clusters = 4;
  int histogram_bins = 1024;
  int kmeans_iterations = 20;
  PositionPolicy positions = PositionPolicy::kAuto;
  std::uint64_t seed = 1;
  std::int64_t elements = 0;  // gradient length; 0: fixed by the first Encode
  bool use_cuda = false;
  bool uniform = false;  // uniform quantization baseline (evenly spaced levels)
};

class CasqCompressor final : public Compressor {
 public:
  // Checks bits in [1, 8], clusters in [1, 2^bits], histogram bins in [16, 4096].
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CasqCompressor>> Create(const CasqParams& params);

  [[nodiscard]] bool mergeable() const noexcept override { return false; }
  [[nodiscard]] absl::Status EncodeInto(std::span<const float> gradient, const EncodeContext& context,
                                        Payload& payload) override;
  [[nodiscard]] absl::Status Decode(std::span<const Payload> payloads, const DecodeOptions& options,
                                    std::span<float> out) override;
  // Exact for a rank with density * n non-zeros (the position mode follows the same rule as
  // Encode with positions = "auto").
  [[nodiscard]] absl::StatusOr<CompressionCost> Cost(const CompressionQuery& query) const override;

 private:
  explicit CasqCompressor(const CasqParams& params) : params_(params) {}
  [[nodiscard]] absl::Status Bind(std::int64_t elements);

  CasqParams params_;
  std::int64_t elements_ = 0;
};

}  // namespace testbed::casq
