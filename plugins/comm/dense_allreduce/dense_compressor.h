// The `none` compressor: no compression, the reference every compressor is measured against.
// The payload is the gradient; payloads merge by a sum all-reduce, so this is exactly the
// ordinary data-parallel gradient all-reduce expressed through the compressor interface.
#pragma once

#include <cstdint>
#include <memory>

#include "testbed/compressor.h"

namespace testbed::dense {

struct DenseParams {
  std::int64_t elements = 0;  // gradient length; 0: fixed by the first Encode
  bool use_cuda = false;
};

class DenseCompressor final : public Compressor {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DenseCompressor>> Create(const DenseParams& params);

  [[nodiscard]] bool mergeable() const noexcept override { return true; }
  [[nodiscard]] absl::Status EncodeInto(std::span<const float> gradient, const EncodeContext& context,
                                        Payload& payload) override;
  [[nodiscard]] absl::Status Decode(std::span<const Payload> payloads, const DecodeOptions& options,
                                    std::span<float> out) override;
  [[nodiscard]] absl::StatusOr<CompressionCost> Cost(const CompressionQuery& query) const override;

 private:
  explicit DenseCompressor(const DenseParams& params) : params_(params) {}
  [[nodiscard]] absl::Status Bind(std::int64_t elements);

  DenseParams params_;
  std::int64_t elements_ = 0;
};

}  // namespace testbed::dense
