// The kernels one layer launches for one micro-batch on one device, with their arithmetic
// (FLOPs) and memory traffic (bytes): the common ground of every device model (roofline,
// calibrated) and of `testbed cost`. Follows Megatron-LM's transformer implementation: fused
// QKV projection, unfused softmax and dropout, column/row tensor-parallel splits, optional
// sequence parallelism (LayerNorm and dropout on 1/tp of the tokens).
#pragma once

#include <string>
#include <vector>

#include "testbed/device_model.h"

namespace testbed {

enum class KernelKind {
  kGemm,         // dense matrix multiply of weights and activations
  kBatchedGemm,  // per-head attention products (QK^T, scores x V)
  kMemory,       // elementwise, normalisation, softmax, gather: bound by memory traffic
};

struct Kernel {
  const char* name = "";  // "qkv", "scores", "softmax", ...
  KernelKind kind = KernelKind::kMemory;
  double flops = 0;
  double bytes = 0;  // read + written in device memory
};

// Kernels of `work` (forward, backward or recompute). Backward of a GEMM is two GEMMs
// (input and weight gradients); backward of a memory-bound op reads and writes about twice
// what its forward does. Unknown layer kinds give an empty list.
[[nodiscard]] std::vector<Kernel> LayerKernels(const LayerWork& work);

}  // namespace testbed
