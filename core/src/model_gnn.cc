#include "model_gnn.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace testbed {

const char* GnnOpName(GnnOp op) noexcept {
  switch (op) {
    case GnnOp::kNone: return "none";
    case GnnOp::kSage: return "sage";
    case GnnOp::kGcn: return "gcn";
    case GnnOp::kGat: return "gat";
  }
  return "?";
}

namespace {

constexpr std::int64_t kFeatureBytes = 4;  // fp32 features and activations, as core/train trains GNNs

absl::StatusOr<GnnOp> OpOf(const ModelShape& s) {
  if (s.gnn_layer == "sage") return GnnOp::kSage;
  if (s.gnn_layer == "gcn") return GnnOp::kGcn;
  if (s.gnn_layer == "gat") return GnnOp::kGat;
  return absl::InvalidArgumentError(
      absl::StrCat("model '", s.name, "' (gnn): gnn_layer '", s.gnn_layer, "' is not one of sage, gcn, gat"));
}

absl::Status CheckGnnShape(const ModelShape& s, GnnOp op) {
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", s.name, "' (gnn): ", what));
  };
  if (s.fanouts.empty()) return bad("fanouts needs one entry per graph layer (neighbours sampled per hop)");
  for (size_t i = 0; i < s.fanouts.size(); ++i) {
    if (s.fanouts[i] < 1) return bad(absl::StrCat("fanouts[", i, "] is ", s.fanouts[i], "; every fanout must be >= 1"));
  }
  const auto hops = static_cast<std::int64_t>(s.fanouts.size());
  if (s.layers != 0 && s.layers != hops) {
    return bad(absl::StrCat("layers is ", s.layers, " but fanouts has ", hops, " entries (one graph layer per hop)"));
  }
  if (s.inputs < 1) return bad("inputs must be >= 1 (features per vertex)");
  if (s.vocab < 2) return bad("vocab must be >= 2 (classes)");
  if (hops > 1 && s.hidden < 1) return bad("hidden must be >= 1");
  if (op == GnnOp::kGat && hops > 1) {
    const std::int64_t heads = s.heads > 0 ? s.heads : 1;
    if (s.hidden % heads != 0) {
      return bad(absl::StrCat("hidden (", s.hidden, ") must be a multiple of heads (", heads, ") for gat"));
    }
  }
  // The sampling tree of one seed: checked in floating point so that its counts stay exact.
  double tree = 1;
  for (std::int64_t f : s.fanouts) tree *= 1.0 + static_cast<double>(f);
  const double width = static_cast<double>(std::max({s.inputs, s.hidden, s.vocab}));
  if (tree * width > 1e15) return bad("the fanouts' sampling tree times the widest layer exceeds 1e15 elements per seed");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelGraph> BuildGnn(const ModelShape& shape) {
  absl::StatusOr<GnnOp> op = OpOf(shape);
  if (!op.ok()) return op.status();
  if (absl::Status st = CheckGnnShape(shape, *op); !st.ok()) return st;
  ModelGraph g;
  g.shape = shape;
  g.shape.seq_len = 1;
  const auto hops = static_cast<int>(shape.fanouts.size());
  g.shape.layers = hops;
  const std::int64_t heads = shape.heads > 0 ? shape.heads : 1;
  for (int i = 0; i < hops; ++i) {
    // Layer i updates the vertices of hop k = hops - 1 - i from those of hop k + 1.
    const int k = hops - 1 - i;
    double targets = 1;
    for (int j = 0; j < k; ++j) targets *= 1.0 + static_cast<double>(shape.fanouts[static_cast<size_t>(j)]);
    const std::int64_t fanout = shape.fanouts[static_cast<size_t>(k)];
    const double rows = targets * (1.0 + static_cast<double>(fanout));  // the layer's input rows
    const double edges = targets * static_cast<double>(fanout);
    const bool last = i == hops - 1;
    const std::int64_t in = i == 0 ? shape.inputs : shape.hidden;
    const std::int64_t out = last ? shape.vocab : shape.hidden;
    Layer l;
    l.name = absl::StrCat("gnn", i);
    l.kind = LayerKind::kGnn;
    l.block = i;
    l.seq_len = 1;
    l.vocab = shape.vocab;
    l.ffn_hidden = in;
    l.hidden = out;
    l.gnn_op = *op;
    l.gnn_fanout = fanout;
    l.gnn_targets_per_sample = targets;
    const double din = static_cast<double>(in), dout = static_cast<double>(out);
    double kept = 0;  // elements kept for backward per seed
    switch (*op) {
      case GnnOp::kSage:
        // x_i W_self + mean_j x_j W_neigh + b, on the targets.
        l.fwd_flops_per_sample = 2.0 * targets * 2.0 * din * dout;
        l.params = 2 * in * out + out;
        kept = rows * din + targets * din + targets * dout;
        break;
      case GnnOp::kGcn:
        // x W on every input row, then the normalised sum over each target's neighbours and itself.
        l.fwd_flops_per_sample = 2.0 * rows * din * dout;
        l.params = in * out + out;
        kept = rows * din + rows * dout + targets * dout;
        break;
      case GnnOp::kGat: {
        // Hidden layers: `heads` heads concatenated; the output layer: one head of the classes.
        const std::int64_t h = last ? 1 : heads;
        l.heads = h;
        l.fwd_flops_per_sample = 2.0 * rows * din * dout;
        l.params = in * out + 2 * out + out;  // W, attention vectors (source, target), bias
        kept = rows * din + rows * dout + 2.0 * (edges + targets) * static_cast<double>(h) + targets * dout;
        break;
      }
      case GnnOp::kNone: break;
    }
    l.bwd_flops_per_sample = 2.0 * l.fwd_flops_per_sample;
    l.activation_bytes_per_sample = static_cast<std::int64_t>(kFeatureBytes * kept);
    l.activation_replicated_bytes_per_sample = l.activation_bytes_per_sample;
    l.output_bytes_per_sample = static_cast<std::int64_t>(kFeatureBytes * targets * dout);
    g.layers.push_back(std::move(l));
  }
  return g;
}

}  // namespace testbed
