#include "testbed/layer_kernels.h"

#include <algorithm>
#include <cmath>

namespace testbed {
namespace {

struct Builder {
  std::vector<Kernel> out;
  bool backward = false;
  double elem = 2;                        // bytes per stored activation element
  Precision arith = Precision::kFp16;     // of every kernel but FP8 linear layers
  bool fp8 = false;                       // FP8 training: linear layers' GEMMs in FP8

  void Push(Kernel k) {
    k.precision = arith;
    out.push_back(k);
  }
  Kernel& LastKernel() { return out.back(); }
  // C[m x n] = A[m x k] B[k x n]; backward adds dA = dC B^T and dB = A^T dC (B a weight
  // matrix when `weights`).
  void Gemm(const char* name, double m, double n, double k, KernelKind kind = KernelKind::kGemm, double batch = 1,
            bool weights = false) {
    const double flops = 2.0 * m * n * k * batch;
    const double bytes = elem * (m * k + k * n + m * n) * batch;
    if (!backward) {
      Push({name, kind, flops, bytes});
    } else {
      Push({name, kind, flops, bytes});  // input gradient
      Push({name, kind, flops, bytes, arith, weights});  // weight (or second operand) gradient
    }
  }
  // The GEMM of a linear layer (weights times activations): FP8 operands under FP8 training.
  void Linear(const char* name, double m, double n, double k) {
    if (!fp8) return Gemm(name, m, n, k, KernelKind::kGemm, 1, true);
    constexpr double kFp8Bytes = 1.0, kOut = 2.0;
    const double flops = 2.0 * m * n * k;
    if (!backward) {
      Push({"fp8_cast_transpose", KernelKind::kMemory, 0.0, (elem + 2 * kFp8Bytes) * m * k});
      out.push_back({name, KernelKind::kGemm, flops, kFp8Bytes * (m * k + k * n) + kOut * m * n, Precision::kFp8});
    } else {
      Push({"fp8_cast_transpose", KernelKind::kMemory, 0.0, (elem + 2 * kFp8Bytes) * m * n});
      // dA = dC B^T (reads dC and B, writes dA); dB = A^T dC (reads A^T and dC, writes dB).
      out.push_back({name, KernelKind::kGemm, flops, kFp8Bytes * (m * n + k * n) + kOut * m * k, Precision::kFp8});
      out.push_back({name, KernelKind::kGemm, flops, kFp8Bytes * (m * k + m * n) + kOut * k * n, Precision::kFp8, true});
    }
  }
  // A memory-bound op over `elements` activations with `passes` reads+writes per element.
  void Memory(const char* name, double elements, double passes) {
    Push({name, KernelKind::kMemory, 0.0, elem * elements * passes * (backward ? 2.0 : 1.0)});
  }
};

}  // namespace

std::vector<Kernel> LayerKernels(const LayerWork& work) {
  Builder b;
  if (work.layer == nullptr) return {};
  const Layer& l = *work.layer;
  b.backward = work.phase == Phase::kBackward;
  b.fp8 = work.precision == Precision::kFp8;
  b.arith = StoragePrecision(work.precision);
  b.elem = ElementBytes(b.arith);
  const double t = std::max(1, work.tp);
  const double samples = static_cast<double>(work.micro_batch) * work.fraction;
  const double s = static_cast<double>(l.seq_len), h = static_cast<double>(l.hidden);
  const double f = static_cast<double>(l.ffn_hidden), a = static_cast<double>(l.heads);
  const double v = static_cast<double>(l.vocab);
  const double tokens = samples * s;
  // LayerNorm and dropout run on a 1/t slice of the tokens under sequence parallelism.
  const double sp_tokens = work.sequence_parallel ? tokens / t : tokens;
  const double heads = a / t, head_dim = h / a;
  switch (l.kind) {
    case LayerKind::kEmbedding:
      b.Memory("embedding_gather", tokens * h, 2);
      b.Memory("embedding_dropout", sp_tokens * h, 3);
      break;
    case LayerKind::kAttention: {
      // Key/value columns per tensor-parallel rank (grouped-query attention: kv heads).
      const double kv_h = head_dim * static_cast<double>(l.kv_heads > 0 ? l.kv_heads : l.heads);
      if (l.flash_attention) {
        // FlashAttention (Dao 2023): scores, softmax and the weighted values in one kernel
        // over tiles in on-chip memory; the s x s scores never reach device memory. Forward:
        // the two products' FLOPs, reading Q, K and V and writing O. Backward recomputes the
        // scores and forms dV, dP, dQ and dK: 2.5 x the forward FLOPs (five products for two),
        // reading Q, K, V, O and dO and writing dQ, dK and dV. Causal: the tiles above the
        // diagonal are skipped, half the products (the model's FLOPs still count them all, as
        // MFU conventions do).
        const double core_flops = (l.causal ? 2.0 : 4.0) * samples * heads * s * s * head_dim;
        const double qkvo = b.elem * tokens * (2 * h + 2 * kv_h) / t;
        b.Memory("layernorm", sp_tokens * h, 2);
        b.Linear("qkv", tokens, (h + 2 * kv_h) / t, h);
        const double scores = (l.causal ? 0.5 : 1.0) * samples * heads * s * s;
        if (!b.backward) {
          b.Push(Kernel{"flash_attention", KernelKind::kBatchedGemm, core_flops, qkvo});
        } else {
          b.Push(Kernel{"flash_attention_backward", KernelKind::kBatchedGemm, 2.5 * core_flops, 2 * qkvo});
        }
        b.LastKernel().special_ops = scores;
        b.Linear("projection", tokens, h, h / t);
        b.Memory("bias_dropout_residual", sp_tokens * h, 4);
        break;
      }
      if (b.backward && work.selective_recompute) {
        // Korthikanti et al. 2022: recompute the attention core before its backward.
        b.backward = false;
        b.Gemm("scores_recompute", s, s, head_dim, KernelKind::kBatchedGemm, samples * heads);
        b.Memory("softmax_recompute", samples * heads * s * s, 2);
        b.Memory("attention_dropout_recompute", samples * heads * s * s, 2.5);
        b.Gemm("context_recompute", s, head_dim, s, KernelKind::kBatchedGemm, samples * heads);
        b.backward = true;
      }
      b.Memory("layernorm", sp_tokens * h, 2);
      b.Linear("qkv", tokens, (h + 2 * kv_h) / t, h);
      b.Gemm("scores", s, s, head_dim, KernelKind::kBatchedGemm, samples * heads);
      b.Memory("softmax", samples * heads * s * s, 2);
      b.Memory("attention_dropout", samples * heads * s * s, 2.5);
      b.Gemm("context", s, head_dim, s, KernelKind::kBatchedGemm, samples * heads);
      b.Linear("projection", tokens, h, h / t);
      b.Memory("bias_dropout_residual", sp_tokens * h, 4);
      break;
    }
    case LayerKind::kMlp:
      b.Memory("layernorm", sp_tokens * h, 2);
      if (l.swiglu) {
        // Gate and up projections as one GEMM of 2f columns, SiLU(gate) x up, down.
        b.Linear("fc1_gate_up", tokens, 2 * f / t, h);
        b.Memory("swiglu", tokens * f / t, 3);
        b.Linear("fc2", tokens, h, f / t);
        b.Memory("bias_dropout_residual", sp_tokens * h, 4);
        break;
      }
      b.Linear("fc1", tokens, f / t, h);
      b.Memory("bias_gelu", tokens * f / t, 2);
      b.Linear("fc2", tokens, h, f / t);
      b.Memory("bias_dropout_residual", sp_tokens * h, 4);
      break;
    case LayerKind::kMoe: {
      // Gate over all experts; each token's FFN work top_k times. Whole: expert parallelism
      // keeps it on average on the token's own device. Under expert parallelism the gate part
      // runs on the token's rank and the experts on the tokens each rank received.
      const double k = static_cast<double>(l.top_k);
      const bool gate = work.part != LayerPart::kMoeExperts;
      const bool experts = work.part != LayerPart::kMoeGate;
      const double expert_tokens = work.part == LayerPart::kWhole ? tokens * k : work.expert_tokens;
      if (gate) {
        b.Memory("layernorm", sp_tokens * h, 2);
        b.Gemm("gate", tokens, static_cast<double>(l.experts), h, KernelKind::kGemm, 1, true);
        b.Memory("gate_softmax_topk", tokens * static_cast<double>(l.experts), 3);
        b.Memory("dispatch", tokens * k * h, 2);
      }
      if (experts && expert_tokens > 0 && l.swiglu) {
        b.Linear("expert_fc1_gate_up", expert_tokens, 2 * f / t, h);
        b.Memory("expert_swiglu", expert_tokens * f / t, 3);
        b.Linear("expert_fc2", expert_tokens, h, f / t);
      } else if (experts && expert_tokens > 0) {
        b.Linear("expert_fc1", expert_tokens, f / t, h);
        b.Memory("expert_gelu", expert_tokens * f / t, 2);
        b.Linear("expert_fc2", expert_tokens, h, f / t);
      }
      if (gate) b.Memory("combine", tokens * k * h, 2);
      break;
    }
    case LayerKind::kHead:
      b.Memory("final_layernorm", sp_tokens * h, 2);
      if (!l.causal) b.Gemm("mlm_transform", tokens, h, h, KernelKind::kGemm, 1, true);
      b.Gemm("logits", tokens, v / t, h, KernelKind::kGemm, 1, true);
      // Cross-entropy on fp32 logits: read, exp, reduce, write the gradient.
      b.Push({"cross_entropy", KernelKind::kMemory, 0.0, 4.0 * tokens * v / t * (b.backward ? 2.0 : 3.0)});
      break;
    case LayerKind::kGnn: {
      if (l.gnn_op == GnnOp::kNone) break;  // a graph layer of no known operator has no kernels
      // One seed's sampling tree (Layer::gnn_targets_per_sample) times the seeds: the targets
      // updated, their sampled neighbours (edges) and the input rows (targets and neighbours).
      const double targets = samples * l.gnn_targets_per_sample, fan = static_cast<double>(l.gnn_fanout);
      const double edges = targets * fan, rows = targets * (1.0 + fan), in = f;
      switch (l.gnn_op) {
        case GnnOp::kSage:
          b.Memory("neighbour_mean", edges * in + targets * in, 1);
          b.Linear("self", targets, h, in);
          b.Linear("neighbour", targets, h, in);
          break;
        case GnnOp::kGcn:
          b.Linear("project", rows, h, in);
          b.Memory("aggregate", (edges + targets) * h + targets * h, 1);
          break;
        case GnnOp::kGat:
          b.Linear("project", rows, h, in);
          b.Memory("attention_scores", (edges + targets) * std::max(1.0, a), 3);
          b.Memory("attention_softmax", (edges + targets) * std::max(1.0, a), 3);
          b.Memory("aggregate", (edges + targets) * h + targets * h, 1);
          break;
        case GnnOp::kNone: break;
      }
      b.Memory("bias_activation", targets * h, 2);
      break;
    }
    case LayerKind::kDense:
      // fp32 rows x (in -> out) and the activation that follows.
      b.Linear("dense", samples, h, static_cast<double>(l.ffn_hidden));
      b.Memory("gelu", samples * h, 2);
      break;
    case LayerKind::kConv: {
      // im2col, then one GEMM of every output pixel's patch against the filters
      // ([samples x pixels, in_channels x k^2] x [in_channels x k^2, out_channels]), the ReLU
      // over the full-size map, and the 2x2 pooling (reads the map, writes a quarter).
      const double pixels = static_cast<double>(l.conv_image_size) * static_cast<double>(l.conv_image_size);
      const double patch = static_cast<double>(l.conv_in_channels) * static_cast<double>(l.conv_kernel) *
                           static_cast<double>(l.conv_kernel);
      const double map = samples * pixels * static_cast<double>(l.conv_out_channels);
      b.Memory("im2col", samples * pixels * patch, 1);
      b.Linear("conv", samples * pixels, static_cast<double>(l.conv_out_channels), patch);
      b.Memory("relu", map, 2);
      b.Memory("max_pool", map, 1.25);
      break;
    }
    case LayerKind::kLstm: {
      // Per direction (cuDNN's persistent-free LSTM): the input's share of the 4 gates for
      // every token in one GEMM, then per time step the recurrent product of the batch's
      // states and the fused gate arithmetic; the steps run one after another.
      // A time slice runs its share of the steps for the whole micro-batch.
      const bool slice = work.part == LayerPart::kTimeSlice;
      const double batch = slice ? static_cast<double>(work.micro_batch) : samples;
      const auto steps = slice ? std::max<std::int64_t>(1, std::llround(static_cast<double>(l.seq_len) * work.fraction))
                               : l.seq_len;
      const double in = f, gates = 4 * h;
      for (std::int64_t dir = 0; dir < l.lstm_directions; ++dir) {
        b.Linear("lstm_input", tokens, gates, in);
        for (std::int64_t step = 0; step < steps; ++step) {
          b.Linear("lstm_recurrent", batch, gates, h);
          b.Memory("lstm_gates", batch * gates, 2);
        }
      }
      break;
    }
    case LayerKind::kGiven:
      break;  // costed from its measured times (DeviceModel::LayerTime), not from kernels
  }
  // A backward split in two: the input gradients now, the weights' gradients later.
  if (b.backward && (work.part == LayerPart::kBackwardData || work.part == LayerPart::kBackwardWeights)) {
    const bool weights = work.part == LayerPart::kBackwardWeights;
    std::erase_if(b.out, [&](const Kernel& k) { return k.weight_gradient != weights; });
  }
  return b.out;
}

int Fp8LinearLayers(const Layer& l) noexcept {
  switch (l.kind) {
    case LayerKind::kAttention:
    case LayerKind::kMlp: return 2;
    case LayerKind::kMoe: return static_cast<int>(2 * l.experts);
    case LayerKind::kGnn: return l.gnn_op == GnnOp::kSage ? 2 : (l.gnn_op == GnnOp::kNone ? 0 : 1);
    case LayerKind::kDense:
    case LayerKind::kConv: return 1;
    case LayerKind::kLstm: return static_cast<int>(2 * l.lstm_directions);
    case LayerKind::kEmbedding:
    case LayerKind::kHead:
    case LayerKind::kGiven: return 0;
  }
  return 0;
}

}  // namespace testbed

namespace testbed {

absl::StatusOr<double> DeviceModel::LayerTime(const LayerWork& work, const DeviceSpec& device) const {
  if (work.layer != nullptr && work.layer->kind == LayerKind::kGiven) {
    const Layer& l = *work.layer;
    double per_micro_batch = work.phase == Phase::kBackward ? l.given_bwd_s : l.given_fwd_s;
    // A measured backward split in two: half each (the two GEMMs of every linear layer).
    if (work.part == LayerPart::kBackwardData || work.part == LayerPart::kBackwardWeights) per_micro_batch /= 2;
    const double scale = l.given_micro_batch > 0
                             ? static_cast<double>(work.micro_batch) / static_cast<double>(l.given_micro_batch)
                             : 1.0;
    return per_micro_batch * scale * work.fraction;
  }
  if ((work.part == LayerPart::kBackwardData || work.part == LayerPart::kBackwardWeights) && !PricesBackwardParts()) {
    LayerWork whole = work;
    whole.part = LayerPart::kWhole;
    absl::StatusOr<double> t = ComputeLayerTime(whole, device);
    if (!t.ok()) return t.status();
    return *t / 2;
  }
  return ComputeLayerTime(work, device);
}

const char* LayerPartName(LayerPart part) noexcept {
  switch (part) {
    case LayerPart::kWhole: return "whole";
    case LayerPart::kMoeGate: return "gate";
    case LayerPart::kMoeExperts: return "experts";
    case LayerPart::kBackwardData: return "data-grad";
    case LayerPart::kBackwardWeights: return "weight-grad";
    case LayerPart::kTimeSlice: return "time-slice";
  }
  return "?";
}

const char* PhaseName(Phase phase) noexcept {
  switch (phase) {
    case Phase::kForward: return "fwd";
    case Phase::kBackward: return "bwd";
    case Phase::kRecompute: return "recompute";
  }
  return "?";
}

}  // namespace testbed
