// Published kernel benchmarks of one device, the data the `calibrated.kernels` device model
// is fitted on: dense GEMM throughput by shape and precision, and FlashAttention forward and
// backward throughput by sequence length and head size, in the CSV layout of
// data/calibration/h100_sxm_kernels.csv (one row per measured kernel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "testbed/device_spec.h"

namespace testbed::calibrated {

enum class BenchKind : std::uint8_t {
  kGemm,          // b independent products of (m x k) by (k x n)
  kFlashForward,   // FlashAttention forward: batch b, m heads, sequence n, head size k
  kFlashBackward,  // its backward, same sizes
  kMemory,         // a memory-bound kernel: b rows of n elements, m passes over them (reads plus
                   // writes of the whole tensor: 2 for a normalisation or softmax forward), k = 1
};
[[nodiscard]] const char* BenchKindName(BenchKind kind) noexcept;

// One measured kernel.
struct KernelBenchRow {
  BenchKind kind = BenchKind::kGemm;
  std::string impl;                         // who ran it: "xla", "torch", "fa3", "triton_fa2", ...
  Precision precision = Precision::kBf16;   // operand format (FP8 GEMMs write BF16)
  std::int64_t b = 1, m = 1, n = 1, k = 1;  // see BenchKind
  bool causal = false;                      // attention: the upper triangle skipped
  double measured_tflops = 0;               // as published, FLOPs counted as below (compute kinds)
  double measured_tb_per_s = 0;             // kMemory: the bytes below over the time, as published
  std::string source;                       // key of the source in the data README
  int line = 0;                             // line in the CSV, for messages

  // FLOPs of the kernel: GEMM 2 b m n k; attention forward 4 b h s^2 d, half when causal,
  // backward 2.5 times the forward (FlashAttention's own conventions, which its published
  // TFLOP/s use).
  [[nodiscard]] double Flops() const noexcept;
  // Bytes through device memory: a GEMM reads both operands once and writes its result
  // (BF16 result for FP8 operands); attention forward reads Q, K and V and writes O, its
  // backward reads Q, K, V, O and dO and writes dQ, dK and dV; a memory-bound kernel m x b x n
  // elements (the traffic its publisher's "model bytes" count).
  [[nodiscard]] double Bytes() const noexcept;
  // Exponentials of an attention kernel, one per score (b h s^2, half when causal); 0 for GEMMs.
  [[nodiscard]] double SpecialOps() const noexcept;
  // The measured time, seconds.
  [[nodiscard]] double MeasuredSeconds() const noexcept {
    return kind == BenchKind::kMemory ? Bytes() / (measured_tb_per_s * 1e12) : Flops() / (measured_tflops * 1e12);
  }
};

// Parses the CSV text: header kind,impl,precision,b,m,n,k,causal,measured_tflops,source and,
// where there are memory rows, measured_tb_per_s (any order; kind gemm, flash_forward,
// flash_backward or memory; a compute row leaves measured_tb_per_s empty, a memory row
// measured_tflops). `source` names the text in errors ("file.csv:12: column 'm': ...").
// Errors: InvalidArgument for a missing column, an unknown kind or precision, a size below 1,
// a throughput that is not a positive number.
[[nodiscard]] absl::StatusOr<std::vector<KernelBenchRow>> ParseKernelBench(absl::string_view text,
                                                                           absl::string_view source);

// Reads and parses a file. Errors: NotFound when it cannot be opened, then as above.
[[nodiscard]] absl::StatusOr<std::vector<KernelBenchRow>> ReadKernelBenchFile(const std::string& path);

// data/calibration/h100_sxm_kernels.csv, embedded into the plugin at build time.
[[nodiscard]] absl::string_view EmbeddedKernelBenchCsv();
inline constexpr const char* kEmbeddedKernelBenchName = "h100_sxm_kernels.csv (embedded)";

}  // namespace testbed::calibrated
