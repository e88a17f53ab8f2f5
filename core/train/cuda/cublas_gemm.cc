// The cuBLAS module (cublas_module.h): SGEMM on one GPU, operands staged from and to host
// memory. Built as libtestbed_cublas.so and opened by MakeCublasGemm on first use.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "cublas_module.h"
#include "testbed/cuda/device_buffer.h"
#include "testbed/train/gemm.h"

namespace testbed::train {
namespace {

class CublasGemm final : public GemmBackend {
 public:
  explicit CublasGemm(int device) : device_(device) {}
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  ~CublasGemm() override {
    if (handle_ != nullptr) {
      cudaSetDevice(device_);
      cublasDestroy(handle_);
    }
  }

  [[nodiscard]] absl::Status Init() {
    if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return Cuda("cudaSetDevice", e);
    if (const cublasStatus_t s = cublasCreate(&handle_); s != CUBLAS_STATUS_SUCCESS) {
      handle_ = nullptr;
      return Blas("cublasCreate", s);
    }
    // Full FP32 products, as on the CPU: no TF32 shortcut.
    if (const cublasStatus_t s = cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH); s != CUBLAS_STATUS_SUCCESS) {
      return Blas("cublasSetMathMode", s);
    }
    return absl::OkStatus();
  }

  absl::Status Gemm(const Matrix<float>& a, bool transpose_a, const Matrix<float>& b, bool transpose_b, float beta,
                    Matrix<float>& c) override {
    const Eigen::Index m = transpose_a ? a.cols() : a.rows();
    const Eigen::Index k = transpose_a ? a.rows() : a.cols();
    const Eigen::Index kb = transpose_b ? b.cols() : b.rows();
    const Eigen::Index n = transpose_b ? b.rows() : b.cols();
    if (k != kb) return absl::InvalidArgumentError(absl::StrCat("gemm: inner dimensions ", k, " and ", kb, " differ"));
    if (beta != 0.0f && (c.rows() != m || c.cols() != n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("gemm: accumulating into ", c.rows(), "x", c.cols(), " but the product is ", m, "x", n));
    }
    if (beta == 0.0f) c.resize(m, n);
    if (m == 0 || n == 0) return absl::OkStatus();
    if (k == 0) {
      // An empty sum: beta * C, where beta = 0 overwrites whatever resize left (NaN * 0 is NaN).
      if (beta == 0.0f) {
        c.setZero();
      } else {
        c *= beta;
      }
      return absl::OkStatus();
    }
    if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return Cuda("cudaSetDevice", e);
    if (absl::Status st = Stage(a_, a); !st.ok()) return st;
    if (absl::Status st = Stage(b_, b); !st.ok()) return st;
    if (const cudaError_t e = c_.Reserve(c.size()); e != cudaSuccess) return Cuda("cudaMalloc", e);
    if (beta != 0.0f) {
      if (const cudaError_t e = cudaMemcpy(c_.get(), c.data(), Bytes(c), cudaMemcpyHostToDevice); e != cudaSuccess) {
        return Cuda("cudaMemcpy to the device", e);
      }
    }
    // Row-major X is column-major X^T: C^T = op(B)^T op(A)^T, so B comes first and each
    // operand is transposed in cuBLAS's terms exactly when it is in ours.
    const float alpha = 1.0f;
    const cublasStatus_t s =
        cublasSgemm(handle_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                    static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b_.get(),
                    static_cast<int>(b.cols()), a_.get(), static_cast<int>(a.cols()), &beta, c_.get(), static_cast<int>(n));
    if (s != CUBLAS_STATUS_SUCCESS) return Blas("cublasSgemm", s);
    if (const cudaError_t e = cudaMemcpy(c.data(), c_.get(), Bytes(c), cudaMemcpyDeviceToHost); e != cudaSuccess) {
      return Cuda("cudaMemcpy to the host", e);
    }
    return absl::OkStatus();
  }

  [[nodiscard]] std::string name() const override { return absl::StrCat("cublas:", device_); }

 private:
  static std::size_t Bytes(const Matrix<float>& x) { return static_cast<std::size_t>(x.size()) * sizeof(float); }
  [[nodiscard]] absl::Status Cuda(const char* what, cudaError_t e) const {
    return absl::InternalError(absl::StrCat(what, " on GPU ", device_, ": ", cudaGetErrorString(e)));
  }
  [[nodiscard]] absl::Status Blas(const char* what, cublasStatus_t s) const {
    return absl::InternalError(absl::StrCat(what, " on GPU ", device_, ": cuBLAS status ", static_cast<int>(s)));
  }
  [[nodiscard]] absl::Status Stage(testbed::cuda::DeviceBuffer<float>& buffer, const Matrix<float>& x) {
    if (const cudaError_t e = buffer.Reserve(x.size()); e != cudaSuccess) {
      return Cuda("cudaMalloc", e);
    }
    if (const cudaError_t e = cudaMemcpy(buffer.get(), x.data(), Bytes(x), cudaMemcpyHostToDevice); e != cudaSuccess) {
      return Cuda("cudaMemcpy to the device", e);
    }
    return absl::OkStatus();
  }

  int device_;
  cublasHandle_t handle_ = nullptr;
  testbed::cuda::DeviceBuffer<float> a_, b_, c_;  // grow to the largest operands seen
};

}  // namespace

absl::StatusOr<std::unique_ptr<GemmBackend>> Make(int device) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (device < 0 || device >= devices) {
    return absl::UnavailableError(
        absl::StrCat("cuBLAS matrix products: no GPU ", device, " (this process sees ", devices, ")"));
  }
  auto gemm = std::make_unique<CublasGemm>(device);
  if (absl::Status s = gemm->Init(); !s.ok()) return s;
  return std::unique_ptr<GemmBackend>(std::move(gemm));
}

}  // namespace testbed::train

extern "C" __attribute__((visibility("default"))) const testbed::train::CublasModule* testbed_cublas_module() {
  static const testbed::train::CublasModule module{testbed::train::kCublasModuleVersion, &testbed::train::Make};
  return &module;
}
