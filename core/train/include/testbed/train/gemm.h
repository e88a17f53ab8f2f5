// The matrix products of the engine's float Linear layers (attention projections, MLPs,
// heads: nearly all of a transformer's FLOPs), on the CPU with Eigen or on a GPU with cuBLAS.
// The backend is chosen per thread, as CUDA chooses a device per thread: the executor gives
// each rank's thread its own. Double-precision layers (gradient checks) always use Eigen.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/train/tensor.h"

namespace testbed::train {

class GemmBackend {
 public:
  virtual ~GemmBackend() = default;
  // c = op(a) op(b) + beta c, op(x) = x or its transpose. c must already have the product's
  // shape when beta != 0 and is resized when beta == 0. Errors: shapes that do not chain
  // (InvalidArgument), device failures (Internal).
  [[nodiscard]] virtual absl::Status Gemm(const Matrix<float>& a, bool transpose_a, const Matrix<float>& b,
                                          bool transpose_b, float beta, Matrix<float>& c) = 0;
  // "eigen", "cublas:0", ...
  [[nodiscard]] virtual std::string name() const = 0;
};

// Eigen on the calling thread (single-threaded, bitwise reproducible).
class EigenGemm final : public GemmBackend {
 public:
  [[nodiscard]] absl::Status Gemm(const Matrix<float>& a, bool transpose_a, const Matrix<float>& b, bool transpose_b,
                                  float beta, Matrix<float>& c) override;
  [[nodiscard]] std::string name() const override { return "eigen"; }
};

// cuBLAS SGEMM on GPU `device` (FP32 math, no TF32), operands copied to the GPU and the result
// back on every call, so layers keep host tensors. Unavailable when built without CUDA or
// when no such GPU answers.
[[nodiscard]] absl::StatusOr<std::unique_ptr<GemmBackend>> MakeCublasGemm(int device);
// GPUs visible to this process (0 without CUDA or a driver).
[[nodiscard]] int CudaDeviceCount() noexcept;

// The calling thread's backend: the innermost ScopedGemm's, else a shared EigenGemm.
[[nodiscard]] GemmBackend& ThreadGemm() noexcept;

// Makes `backend` the calling thread's for the scope's lifetime (the backend must outlive it).
class ScopedGemm {
 public:
  explicit ScopedGemm(GemmBackend& backend) noexcept;
  ~ScopedGemm();
  ScopedGemm(const ScopedGemm&) = delete;
  ScopedGemm& operator=(const ScopedGemm&) = delete;

 private:
  GemmBackend* previous_;
};

}  // namespace testbed::train
