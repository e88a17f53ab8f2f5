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
  // The arithmetic's format: the work's precision, except under FP8 training, where the
  // linear layers' GEMMs are kFp8 and everything else is kBf16 (StoragePrecision).
  Precision precision = Precision::kFp16;
  // A backward GEMM forming a weight's gradient (not needed by the layers before).
  bool weight_gradient = false;
  // Special-function operations (the softmax's exponentials) of a fused attention kernel:
  // one per attention score, forward and backward (which recomputes them). On Hopper they
  // run on units some 250x slower than the tensor cores and bound FlashAttention besides its
  // GEMMs (Shah et al. 2024, FlashAttention-3); device models may cost them. 0 elsewhere.
  double special_ops = 0;
};

// Kernels of `work` (forward, backward or recompute). Backward of a GEMM is two GEMMs
// (input and weight gradients); backward of a memory-bound op reads and writes about twice
// what its forward does. Unknown layer kinds give an empty list. A backward's part
// kBackwardData keeps every kernel but the weight-gradient GEMMs, kBackwardWeights only those.
//
// FP8 training (work.precision kFp8, Transformer Engine's recipe as Megatron-Core runs it):
// the linear layers' GEMMs (QKV, projection, FFN, experts; dense, convolution and graph
// layers) read FP8 operands (1 byte) and write BF16 (2 bytes), each forward input first cast
// to FP8 with its transpose kept for the weight gradient ("fp8_cast_transpose": read 2 bytes,
// write 1 + 1 per element), each backward output gradient likewise. The attention core, the
// router, the output logits and every memory-bound op stay BF16. Transformer Engine fuses
// some forward casts into the LayerNorm or GeLU before them; here each is its own pass.
[[nodiscard]] std::vector<Kernel> LayerKernels(const LayerWork& work);

// Linear layers of `layer` whose GEMMs run in FP8 under FP8 training, each keeping its own
// scaling state (per-expert linear layers count once per expert).
[[nodiscard]] int Fp8LinearLayers(const Layer& layer) noexcept;

}  // namespace testbed
