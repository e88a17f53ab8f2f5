// The `s2reducer` compressor (S2Reducer, sparse sketch reducer): a bitmap of the non-zero
// positions, combined across ranks by bitwise OR, plus a count sketch of the non-zero values,
// combined by a plain sum all-reduce; decoding takes the median over the sketch rows at the
// positions the combined bitmap marks. Payloads are mergeable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "sketch_shape.h"
#include "testbed/compressor.h"

namespace testbed::s2reducer {

struct S2ReducerParams {
  int rows = 3;
  std::int64_t columns = 0;   // counters per row; 0: derived from `ratio`
  double ratio = 8.0;         // gradient bytes / sketch bytes, used when columns == 0
  std::uint64_t seed = 1;
  std::int64_t elements = 0;  // gradient length; 0: fixed by the first Encode
  bool use_cuda = false;      // run the CUDA kernels (host buffers are copied to the GPU)
};

class S2ReducerCompressor final : public Compressor {
 public:
  // Checks the parameters (rows in [1, kMaxRows], ratio >= 1, columns below 2^32, CUDA
  // present when asked for).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<S2ReducerCompressor>> Create(const S2ReducerParams& params);

  [[nodiscard]] bool mergeable() const noexcept override { return true; }
  [[nodiscard]] absl::Status EncodeInto(std::span<const float> gradient, const EncodeContext& context,
                                        Payload& payload) override;
  [[nodiscard]] absl::Status Decode(std::span<const Payload> payloads, const DecodeOptions& options,
                                    std::span<float> out) override;
  // Assumes each rank's non-zeros sit at independent uniformly random positions, so the
  // combined bitmap marks n * (1 - (1 - density)^ranks) positions for the decoder.
  [[nodiscard]] absl::StatusOr<CompressionCost> Cost(const CompressionQuery& query) const override;

  // The shape this compressor uses for a gradient of `elements` values.
  [[nodiscard]] SketchShape ShapeFor(std::int64_t elements) const noexcept;

 private:
  explicit S2ReducerCompressor(const S2ReducerParams& params) : params_(params) {}
  [[nodiscard]] absl::Status Bind(std::int64_t elements);

  S2ReducerParams params_;
  std::optional<SketchShape> shape_;
};

}  // namespace testbed::s2reducer
