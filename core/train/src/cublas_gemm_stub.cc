// MakeCublasGemm when the library is built without CUDA.
#include "testbed/train/gemm.h"

namespace testbed::train {

absl::StatusOr<std::unique_ptr<GemmBackend>> MakeCublasGemm(int) {
  return absl::UnavailableError("cuBLAS matrix products: built without CUDA");
}

int CudaDeviceCount() noexcept { return 0; }

}  // namespace testbed::train
