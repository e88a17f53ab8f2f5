// The CUDA twins when the library is built without CUDA: nothing is available.
#include "testbed/train/cuda_kernels.h"

namespace testbed::train::cuda {
namespace {

absl::Status NoCuda() { return absl::UnavailableError("built without CUDA"); }

}  // namespace

bool Available() noexcept { return false; }
absl::Status GeluForward(const float*, float*, std::int64_t) { return NoCuda(); }
absl::Status GeluBackward(const float*, const float*, float*, std::int64_t) { return NoCuda(); }
absl::Status LayerNormForward(const float*, const float*, const float*, float*, std::int64_t, std::int64_t, float) {
  return NoCuda();
}
absl::Status SoftmaxRows(const float*, float*, std::int64_t, std::int64_t) { return NoCuda(); }

}  // namespace testbed::train::cuda
