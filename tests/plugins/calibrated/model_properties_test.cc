// The calibrated DeviceModel on work the measurements never covered: hidden sizes absent from
// the file, other devices and precisions, other layer kinds. Properties that any physical
// layer-time model must have, and errors instead of crashes for impossible work.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "calibrated_model.h"

namespace testbed::calibrated {
namespace {

DeviceSpec Rtx3090() {
  DeviceSpec d;
  d.name = "rtx3090";
  d.vendor = "nvidia";
  d.peak_flops = {{Precision::kFp32, 35.6e12}, {Precision::kTf32, 35.6e12}, {Precision::kFp16, 71.0e12},
                  {Precision::kBf16, 71.0e12}, {Precision::kInt8, 284.0e12}};
  d.memory_bytes = 24LL << 30;
  d.memory_bandwidth_bytes_per_s = 936.2e9;
  return d;
}

class CalibratedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto rows = ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName);
    ASSERT_TRUE(rows.ok()) << rows.status();
    auto cal = FitCalibration(*rows, CalibrationSetup{});
    ASSERT_TRUE(cal.ok()) << cal.status();
    model_ = new CalibratedModel(*cal);
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  // One GPT block of hidden size h (heads h / 64, sequence 1024), plus embedding and head.
  static ModelGraph Graph(std::int64_t h, std::int64_t experts = 0) {
    ModelShape s;
    s.name = "h" + std::to_string(h);
    s.family = experts > 0 ? "moe-gpt" : "gpt";
    s.layers = 1;
    s.hidden = h;
    s.heads = h / 64;
    s.seq_len = 1024;
    s.vocab = 51200;
    s.experts = experts;
    auto g = BuildModelGraph(s);
    EXPECT_TRUE(g.ok()) << g.status();
    return *g;
  }
  static const Layer& Find(const ModelGraph& g, LayerKind kind) {
    for (const Layer& l : g.layers) {
      if (l.kind == kind) return l;
    }
    ADD_FAILURE() << "no " << LayerKindName(kind) << " layer";
    return g.layers.front();
  }
  static double Time(const Layer& l, Phase phase, std::int64_t mb, int tp, const DeviceSpec& d = Rtx3090(),
                     Precision p = Precision::kFp16) {
    LayerWork w;
    w.layer = &l;
    w.phase = phase;
    w.micro_batch = mb;
    w.tp = tp;
    w.precision = p;
    auto t = model_->LayerTime(w, d);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : std::numeric_limits<double>::quiet_NaN();
  }

  static CalibratedModel* model_;
};
CalibratedModel* CalibratedModelTest::model_ = nullptr;

// Hidden sizes the file lacks, and the three it has.
constexpr std::int64_t kHidden[] = {1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192};
constexpr LayerKind kKinds[] = {LayerKind::kAttention, LayerKind::kMlp};
constexpr int kTp[] = {1, 2, 4, 8, 16, 32};

bool Divides(int tp, std::int64_t h) { return (h / 64) % tp == 0; }

TEST_F(CalibratedModelTest, LayerTimeEqualsTheFitOnMeasuredRows) {
  auto rows = ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName);
  ASSERT_TRUE(rows.ok());
  int checked = 0;
  for (const Measurement& m : *rows) {
    if (!(m.attn_fp_ms > 0)) continue;
    const ModelGraph g = Graph(m.hidden);
    for (OpClass op : kOpClasses) {
      auto fit = PredictMeasuredMs(model_->calibration(), m, op);
      ASSERT_TRUE(fit.ok()) << fit.status();
      const double t = Time(Find(g, LayerKindOf(op)), PhaseOf(op), m.micro_batch, static_cast<int>(m.tp));
      EXPECT_NEAR(t * 1e3, *fit, 1e-9 * *fit);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 82);
}

TEST_F(CalibratedModelTest, GrowsWithMicroBatch) {
  for (std::int64_t h : kHidden) {
    const ModelGraph g = Graph(h);
    for (LayerKind kind : kKinds) {
      for (int tp : kTp) {
        if (!Divides(tp, h)) continue;
        for (Phase phase : {Phase::kForward, Phase::kBackward}) {
          for (std::int64_t mb = 1; mb < 64; mb *= 2) {
            EXPECT_LT(Time(Find(g, kind), phase, mb, tp), Time(Find(g, kind), phase, 2 * mb, tp))
                << "hidden " << h << " " << LayerKindName(kind) << " tp " << tp << " mb " << mb;
          }
        }
      }
    }
  }
}

TEST_F(CalibratedModelTest, GrowsWithHiddenSize) {
  for (LayerKind kind : kKinds) {
    for (int tp : {1, 2, 4, 8, 16}) {
      for (Phase phase : {Phase::kForward, Phase::kBackward}) {
        for (std::int64_t mb : {1, 4, 16}) {
          double previous = 0;
          for (std::int64_t h : kHidden) {
            if (!Divides(tp, h)) continue;
            const ModelGraph g = Graph(h);
            const double t = Time(Find(g, kind), phase, mb, tp);
            EXPECT_GT(t, previous) << LayerKindName(kind) << " hidden " << h << " tp " << tp << " mb " << mb;
            previous = t;
          }
        }
      }
    }
  }
}

TEST_F(CalibratedModelTest, BackwardExceedsForwardAndRecomputeIsAForward) {
  for (std::int64_t h : kHidden) {
    const ModelGraph g = Graph(h);
    for (LayerKind kind : kKinds) {
      for (int tp : kTp) {
        if (!Divides(tp, h)) continue;
        for (std::int64_t mb : {1, 2, 8, 32}) {
          const Layer& l = Find(g, kind);
          const double fwd = Time(l, Phase::kForward, mb, tp);
          EXPECT_GT(Time(l, Phase::kBackward, mb, tp), fwd) << LayerKindName(kind) << " hidden " << h << " tp " << tp;
          EXPECT_DOUBLE_EQ(Time(l, Phase::kRecompute, mb, tp), fwd);
        }
      }
    }
  }
}

TEST_F(CalibratedModelTest, MoreTensorParallelismLessTimePerDevice) {
  for (std::int64_t h : kHidden) {
    const ModelGraph g = Graph(h);
    for (LayerKind kind : kKinds) {
      for (Phase phase : {Phase::kForward, Phase::kBackward}) {
        for (std::int64_t mb : {1, 4, 16}) {
          for (int tp = 1; 2 * tp <= 32 && Divides(2 * tp, h); tp *= 2) {
            const double t1 = Time(Find(g, kind), phase, mb, tp), t2 = Time(Find(g, kind), phase, mb, 2 * tp);
            EXPECT_LT(t2, t1) << LayerKindName(kind) << " hidden " << h << " mb " << mb << " tp " << tp;
            // Large work is compute: doubling the TP degree nearly halves it. Only the
            // LayerNorm, residual and per-kernel costs, which TP does not split, remain.
            if (h >= 4096 && mb >= 4 && tp <= 8) {
              EXPECT_LT(t2 / t1, 0.75) << LayerKindName(kind) << " hidden " << h << " mb " << mb << " tp " << tp;
            }
          }
        }
      }
    }
  }
}

TEST_F(CalibratedModelTest, ScalesWithTheDevicesPeakAndBandwidth) {
  // Every term but the per-kernel overhead is FLOPs or bytes over the device's figures, so a
  // device twice as fast in both runs the rest in exactly half the time.
  DeviceSpec fast = Rtx3090();
  for (auto& [p, peak] : fast.peak_flops) peak *= 2;
  fast.memory_bandwidth_bytes_per_s *= 2;
  for (std::int64_t h : {1536, 5120}) {
    const ModelGraph g = Graph(h);
    for (OpClass op : kOpClasses) {
      const Layer& l = Find(g, LayerKindOf(op));
      LayerWork w;
      w.layer = &l;
      w.phase = PhaseOf(op);
      w.micro_batch = 4;
      w.tp = 2;
      const double overhead =
          static_cast<double>(LayerKernels(w).size()) * model_->calibration().For(op).kernel_overhead_s;
      const double slow_t = Time(l, w.phase, 4, 2), fast_t = Time(l, w.phase, 4, 2, fast);
      EXPECT_NEAR(fast_t - overhead, (slow_t - overhead) / 2, 1e-12) << OpClassName(op);
    }
  }
  // FP32 work runs at the FP32 peak with 4-byte elements: slower than FP16.
  const ModelGraph g = Graph(2560);
  EXPECT_GT(Time(Find(g, LayerKind::kMlp), Phase::kForward, 4, 1, Rtx3090(), Precision::kFp32),
            1.5 * Time(Find(g, LayerKind::kMlp), Phase::kForward, 4, 1));
}

TEST_F(CalibratedModelTest, OtherLayerKindsAndFractions) {
  const ModelGraph dense = Graph(2048), moe = Graph(2048, 8);
  for (const Layer* l : {&Find(dense, LayerKind::kEmbedding), &Find(dense, LayerKind::kHead),
                         &Find(moe, LayerKind::kMoe)}) {
    for (Phase phase : {Phase::kForward, Phase::kBackward}) {
      const double t = Time(*l, phase, 4, 2);
      EXPECT_TRUE(std::isfinite(t) && t > 0) << l->name;
    }
  }
  const Layer& mlp = Find(dense, LayerKind::kMlp);
  LayerWork half;
  half.layer = &mlp;
  half.micro_batch = 8;
  half.tp = 2;
  half.fraction = 0.5;
  auto t_half = model_->LayerTime(half, Rtx3090());
  ASSERT_TRUE(t_half.ok()) << t_half.status();
  EXPECT_NEAR(*t_half, Time(mlp, Phase::kForward, 4, 2), 1e-15);  // half of 8 sequences is 4

  auto k1 = model_->KernelTime(1e9, 1e8, Precision::kFp16, Rtx3090());
  auto k2 = model_->KernelTime(1e9, 1e9, Precision::kFp16, Rtx3090());
  ASSERT_TRUE(k1.ok() && k2.ok());
  EXPECT_GT(*k1, 0);
  EXPECT_GT(*k2, *k1);
}

TEST_F(CalibratedModelTest, SelectiveRecomputeCostsTheAttentionCoreAsForwardWork) {
  for (std::int64_t h : {1536, 4096}) {
    const ModelGraph g = Graph(h);
    const Layer& att = Find(g, LayerKind::kAttention);
    LayerWork w;
    w.layer = &att;
    w.phase = Phase::kBackward;
    w.micro_batch = 4;
    w.tp = 2;
    auto plain = model_->LayerTime(w, Rtx3090());
    w.selective_recompute = true;
    auto with_recompute = model_->LayerTime(w, Rtx3090());
    ASSERT_TRUE(plain.ok() && with_recompute.ok());
    // The recomputed part (scores, softmax, dropout, context) is a strict part of a forward.
    const double forward = Time(att, Phase::kForward, 4, 2);
    EXPECT_GT(*with_recompute, *plain);
    EXPECT_LT(*with_recompute - *plain, forward);
  }
}

TEST_F(CalibratedModelTest, ImpossibleWorkIsAnError) {
  const ModelGraph g = Graph(1024);  // 16 heads, FFN 4096
  const Layer& att = Find(g, LayerKind::kAttention);
  const Layer& mlp = Find(g, LayerKind::kMlp);
  auto code = [&](const Layer* l, std::int64_t mb, int tp, double fraction = 1.0, const DeviceSpec& d = Rtx3090(),
                  Precision p = Precision::kFp16) {
    LayerWork w;
    w.layer = l;
    w.micro_batch = mb;
    w.tp = tp;
    w.fraction = fraction;
    w.precision = p;
    return model_->LayerTime(w, d).status().code();
  };
  using absl::StatusCode;
  EXPECT_EQ(code(nullptr, 1, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 0, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, -3, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 1, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 1, 32), StatusCode::kInvalidArgument);  // 16 heads: the file's -1 rows
  EXPECT_EQ(code(&att, 1, 3), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&mlp, 1, 3), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 1, 1, 0.0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 1, 1, 1.5), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 1, 1, std::numeric_limits<double>::quiet_NaN()), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&att, 1, 1, 1.0, Rtx3090(), Precision::kFp8), StatusCode::kInvalidArgument);  // no FP8 peak
  DeviceSpec no_bandwidth = Rtx3090();
  no_bandwidth.memory_bandwidth_bytes_per_s = 0;
  EXPECT_EQ(code(&att, 1, 1, 1.0, no_bandwidth), StatusCode::kInvalidArgument);

  Layer gnn = att;
  gnn.kind = LayerKind::kGnn;
  EXPECT_EQ(code(&gnn, 1, 1), StatusCode::kUnimplemented);

  EXPECT_EQ(model_->KernelTime(-1, 10, Precision::kFp16, Rtx3090()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->KernelTime(1, std::numeric_limits<double>::infinity(), Precision::kFp16, Rtx3090()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->KernelTime(1e6, 10, Precision::kFp8, Rtx3090()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(model_->KernelTime(0, 10, Precision::kFp8, Rtx3090()).ok());  // pure memory: no peak needed
}

}  // namespace
}  // namespace testbed::calibrated
