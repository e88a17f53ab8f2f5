#include "calibration.h"

#include <cmath>

#include <Eigen/Dense>

#include "absl/strings/str_cat.h"
#include "nnls.h"

namespace testbed::calibrated {

const char* OpClassName(OpClass op) noexcept {
  switch (op) {
    case OpClass::kAttentionForward: return "attn_fp";
    case OpClass::kAttentionBackward: return "attn_bp";
    case OpClass::kMlpForward: return "mlp_fp";
    case OpClass::kMlpBackward: return "mlp_bp";
  }
  return "?";
}

LayerKind LayerKindOf(OpClass op) noexcept {
  return op == OpClass::kAttentionForward || op == OpClass::kAttentionBackward ? LayerKind::kAttention
                                                                                : LayerKind::kMlp;
}

Phase PhaseOf(OpClass op) noexcept {
  return op == OpClass::kAttentionForward || op == OpClass::kMlpForward ? Phase::kForward : Phase::kBackward;
}

double MeasuredMs(const Measurement& m, OpClass op) noexcept {
  switch (op) {
    case OpClass::kAttentionForward: return m.attn_fp_ms;
    case OpClass::kAttentionBackward: return m.attn_bp_ms;
    case OpClass::kMlpForward: return m.mlp_fp_ms;
    case OpClass::kMlpBackward: return m.mlp_bp_ms;
  }
  return -1;
}

absl::StatusOr<std::vector<Kernel>> MeasuredKernels(const Measurement& m, OpClass op, const CalibrationSetup& setup) {
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("measurement on line ", m.line, " (hidden ", m.hidden, ", tp ", m.tp,
                                                   ", micro_batch ", m.micro_batch, "): ", what));
  };
  if (setup.head_dim < 1 || m.hidden % setup.head_dim != 0) {
    return bad(absl::StrCat("hidden is not a multiple of the head size ", setup.head_dim));
  }
  const std::int64_t heads = m.hidden / setup.head_dim;
  if (m.tp < 1 || heads % m.tp != 0) return bad(absl::StrCat("tp does not divide the ", heads, " heads"));
  if (m.micro_batch < 1) return bad("micro_batch must be >= 1");

  ModelShape shape;
  shape.name = absl::StrCat("calibration-h", m.hidden);
  shape.layers = 1;
  shape.hidden = m.hidden;
  shape.heads = heads;
  shape.seq_len = setup.seq_len;
  shape.vocab = 1;  // the head is not measured; any vocabulary will do
  auto graph = BuildModelGraph(shape);
  if (!graph.ok()) return bad(std::string(graph.status().message()));
  const Layer* layer = nullptr;
  for (const Layer& l : graph->layers) {
    if (l.kind == LayerKindOf(op)) {
      layer = &l;
      break;
    }
  }
  if (layer == nullptr) return absl::InternalError("calibration graph lacks the measured layer kind");
  LayerWork work;
  work.layer = layer;
  work.phase = PhaseOf(op);
  work.micro_batch = m.micro_batch;
  work.tp = static_cast<int>(m.tp);
  work.precision = setup.precision;
  // Kernel names are string literals, so the kernels outlive the graph.
  return LayerKernels(work);
}

namespace {

absl::StatusOr<KernelFeatures> MeasuredFeatures(const Measurement& m, OpClass op, const CalibrationSetup& setup) {
  auto kernels = MeasuredKernels(m, op, setup);
  if (!kernels.ok()) return kernels.status();
  // The measurements are of one precision, at the setup's peak.
  return FeaturesOf(*kernels, [&](Precision) { return setup.peak_flops; }, setup.bandwidth_bytes_per_s);
}

absl::StatusOr<OpCoefficients> FitOne(const std::vector<Measurement>& rows, OpClass op, const CalibrationSetup& setup,
                                      int* used) {
  constexpr int n = KernelFeatures::kCount;
  std::vector<std::array<double, n>> x;
  std::vector<double> t;
  for (const Measurement& m : rows) {
    const double ms = MeasuredMs(m, op);
    if (!(ms > 0)) continue;  // -1: did not run
    auto f = MeasuredFeatures(m, op, setup);
    if (!f.ok()) return f.status();
    x.push_back(f->AsArray());
    t.push_back(ms * 1e-3);
  }
  *used = static_cast<int>(t.size());
  if (static_cast<int>(t.size()) < n) {
    return absl::FailedPreconditionError(absl::StrCat("calibrated: ", t.size(), " measured rows for ", OpClassName(op),
                                                      ", at least ", n, " are needed to fit it"));
  }
  // Relative residuals: divide each row by its measured time. The lower bounds are moved
  // into the target (c = lower + d, d >= 0) so that plain NNLS solves the bounded problem,
  // and columns are scaled to unit norm so that seconds and kernel counts weigh alike.
  const auto& lower = CoefficientLowerBounds();
  Eigen::MatrixXd a(static_cast<Eigen::Index>(t.size()), n);
  Eigen::VectorXd b(static_cast<Eigen::Index>(t.size()));
  for (std::size_t i = 0; i < t.size(); ++i) {
    double rest = 1.0;
    for (int j = 0; j < n; ++j) {
      const double v = x[i][static_cast<std::size_t>(j)] / t[i];
      a(static_cast<Eigen::Index>(i), j) = v;
      rest -= lower[static_cast<std::size_t>(j)] * v;
    }
    b[static_cast<Eigen::Index>(i)] = rest;
  }
  Eigen::VectorXd scale(n);
  for (int j = 0; j < n; ++j) {
    if (!setup.fit_terms[static_cast<std::size_t>(j)]) a.col(j).setZero();
    const double norm = a.col(j).norm();
    scale[j] = norm > 0 ? norm : 1.0;  // an all-zero term (no batched GEMMs in an MLP) stays at its bound
    a.col(j) /= scale[j];
  }
  auto d = SolveNnls(a, b);
  if (!d.ok()) return d.status();
  std::array<double, n> c{};
  for (int j = 0; j < n; ++j) c[static_cast<std::size_t>(j)] = lower[static_cast<std::size_t>(j)] + (*d)[j] / scale[j];
  return OpCoefficients::FromArray(c);
}

}  // namespace

absl::StatusOr<Calibration> FitCalibration(const std::vector<Measurement>& rows, const CalibrationSetup& setup) {
  if (!(setup.peak_flops > 0) || !(setup.bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError("calibrated: the measured device's peak FLOP/s and bandwidth must be positive");
  }
  Calibration cal;
  cal.setup = setup;
  for (OpClass op : kOpClasses) {
    const auto i = static_cast<std::size_t>(op);
    auto c = FitOne(rows, op, setup, &cal.rows_fitted[i]);
    if (!c.ok()) return c.status();
    cal.ops[i] = *c;
  }
  return cal;
}

absl::StatusOr<double> PredictMeasuredMs(const Calibration& calibration, const Measurement& m, OpClass op) {
  auto f = MeasuredFeatures(m, op, calibration.setup);
  if (!f.ok()) return f.status();
  return calibration.For(op).Time(*f) * 1e3;
}

}  // namespace testbed::calibrated
