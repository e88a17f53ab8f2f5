// The `calibrated.kernels` device model against the published H100 SXM kernel benchmarks it
// is fitted on (data/calibration/h100_sxm_kernels.csv): the fit's error in sample, its error
// on sizes held out of the fit, its prediction of an H200-class device it never saw, the
// closed forms it prices kernels by, and the built plugin. The tables printed here are the
// ones in plugins/sim/calibrated/README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/plugin_loader.h"
#include "error_stats.h"
#include "kernel_bench.h"
#include "kernel_fit.h"
#include "kernel_model.h"
#include "testbed/registry.h"

namespace testbed::calibrated {
namespace {

using testing::RowError;
using testing::Summarise;

std::vector<KernelBenchRow> Embedded() {
  auto rows = ParseKernelBench(EmbeddedKernelBenchCsv(), kEmbeddedKernelBenchName);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<KernelBenchRow>{};
}

RowError ErrorOf(const KernelFit& fit, const KernelBenchRow& r) {
  const double predicted = r.Flops() / fit.Predict(r) / 1e12;
  char row[200];
  std::snprintf(row, sizeof(row), "%s %s %s b%lld %lldx%lldx%lld: %.1f TFLOP/s measured, %.1f predicted",
                BenchKindName(r.kind), r.impl.c_str(), PrecisionName(r.precision), static_cast<long long>(r.b),
                static_cast<long long>(r.m), static_cast<long long>(r.n), static_cast<long long>(r.k),
                r.measured_tflops, predicted);
  return {100.0 * std::abs(fit.Predict(r) - r.MeasuredSeconds()) / r.MeasuredSeconds(), row};
}

bool IsGemmBf16(const KernelBenchRow& r) { return r.kind == BenchKind::kGemm && r.precision != Precision::kFp8; }
bool IsFa3(const KernelBenchRow& r) { return r.kind == BenchKind::kFlashForward && r.impl == "fa3" && !r.causal; }
bool IsFa3Backward(const KernelBenchRow& r) { return r.kind == BenchKind::kFlashBackward && r.impl == "fa3"; }

void Print(const char* what, const testing::ErrorStats& s) {
  std::printf("%-44s rows %3d  median %5.1f%%  worst %5.1f%%  (%s)\n", what, s.rows, s.median_pct, s.worst_pct,
              s.worst_row.c_str());
}

TEST(KernelBench, EmbeddedFileHasEveryPublishedRow) {
  const std::vector<KernelBenchRow> rows = Embedded();
  int xla = 0, mamf = 0, fa3 = 0, fa2 = 0, fa3_tritonbench = 0, triton_fa2 = 0;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;
  for (const KernelBenchRow& r : rows) {
    xla += r.source == "xla_sm90";
    mamf += r.source == "mamf";
    fa3 += r.impl == "fa3";
    fa2 += r.impl == "fa2";
    fa3_tritonbench += r.impl == "fa3_tritonbench";
    triton_fa2 += r.impl == "triton_fa2";
    if (r.source == "xla_sm90") shapes.insert({r.b, r.m, r.n, r.k});
    EXPECT_LT(r.measured_tflops, r.precision == Precision::kFp8 ? 1978.9 : 989.4) << "line " << r.line;
  }
  EXPECT_EQ(xla, 375);  // the full grid b in {1,2,4} x m, n, k in {256, ..., 4096}
  EXPECT_EQ(shapes.size(), 375u);
  EXPECT_EQ(mamf, 2);
  // The FA3 paper's forward (heads 64 and 128; head 128 from 1K), causal forward (head 64)
  // and backward (heads 64 and 128); FlashAttention-2: the same figures' bars (from 512).
  EXPECT_EQ(fa3, 29);
  EXPECT_EQ(fa2, 30);
  EXPECT_EQ(fa3_tritonbench, 6);
  EXPECT_EQ(triton_fa2, 6);
}

TEST(KernelBench, BadRowsAreNamedByFileLineAndColumn) {
  const std::string header = "kind,impl,precision,b,m,n,k,causal,measured_tflops,source\n";
  auto bad_kind = ParseKernelBench(header + "conv,x,bf16,1,2,3,4,0,1.0,s\n", "k.csv");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.status().message().find("k.csv:2: column 'kind'"), std::string::npos) << bad_kind.status();
  auto bad_size = ParseKernelBench(header + "gemm,x,bf16,1,0,3,4,0,1.0,s\n", "k.csv");
  ASSERT_FALSE(bad_size.ok());
  EXPECT_NE(bad_size.status().message().find("column 'm'"), std::string::npos) << bad_size.status();
  auto bad_precision = ParseKernelBench(header + "gemm,x,fp7,1,2,3,4,0,1.0,s\n", "k.csv");
  ASSERT_FALSE(bad_precision.ok());
  EXPECT_NE(bad_precision.status().message().find("column 'precision'"), std::string::npos);
  auto bad_rate = ParseKernelBench(header + "gemm,x,bf16,1,2,3,4,0,-3,s\n", "k.csv");
  ASSERT_FALSE(bad_rate.ok());
  EXPECT_NE(bad_rate.status().message().find("measured_tflops"), std::string::npos);
  auto no_column = ParseKernelBench("kind,impl\n", "k.csv");
  ASSERT_FALSE(no_column.ok());
  EXPECT_NE(no_column.status().message().find("header lacks the column 'precision'"), std::string::npos);
  auto missing = ReadKernelBenchFile("/nonexistent/bench.csv");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  // Memory rows: their throughput in measured_tb_per_s, which a header may only omit without them.
  auto no_rate_column = ParseKernelBench(header + "memory,x,bf16,8,2,4096,1,0,,s\n", "k.csv");
  ASSERT_FALSE(no_rate_column.ok());
  EXPECT_NE(no_rate_column.status().message().find("k.csv:2: a memory row needs the column 'measured_tb_per_s'"),
            std::string::npos)
      << no_rate_column.status();
  const std::string with_rate = "kind,impl,precision,b,m,n,k,causal,measured_tflops,source,measured_tb_per_s\n";
  auto bad_bandwidth = ParseKernelBench(with_rate + "memory,x,bf16,8,2,4096,1,0,,s,fast\n", "k.csv");
  ASSERT_FALSE(bad_bandwidth.ok());
  EXPECT_NE(bad_bandwidth.status().message().find("column 'measured_tb_per_s': 'fast' is not a positive number of TB/s"),
            std::string::npos)
      << bad_bandwidth.status();
  auto memory = ParseKernelBench(with_rate + "memory,x,bf16,8,2,4096,1,0,,s,2.5\ngemm,x,bf16,1,2,3,4,0,1.0,s,\n", "k.csv");
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_DOUBLE_EQ((*memory)[0].Bytes(), 2.0 * 8 * 4096 * 2);
  EXPECT_DOUBLE_EQ((*memory)[0].MeasuredSeconds(), 2.0 * 8 * 4096 * 2 / 2.5e12);
  EXPECT_DOUBLE_EQ((*memory)[0].Flops(), 0.0);
}

TEST(KernelFit, InSampleError) {
  auto fit = FitKernels(Embedded(), KernelFitSetup{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  const auto show = [](const char* what, const KernelTerms& k) {
    std::printf("  %-22s eta %.3f  ceiling %.3f  special %.1f / peak  traffic eta %.3f  overhead %.2f us\n", what,
                1 / k.compute, k.ceiling, k.special, k.traffic > 0 ? 1 / k.traffic : 0.0, k.overhead_s * 1e6);
  };
  std::printf("H100 SXM fit:\n");
  show("BF16 GEMM", fit->gemm);
  show("FP8 GEMM", fit->gemm_fp8);
  show("FA3 forward", fit->flash_forward);
  show("FA3 backward", fit->flash_backward);
  std::vector<RowError> gemm, gemm_large, fp8, fa3, fa3_bwd;
  for (const KernelBenchRow& r : Embedded()) {
    if (IsGemmBf16(r)) {
      gemm.push_back(ErrorOf(*fit, r));
      if (r.MeasuredSeconds() >= 50e-6) gemm_large.push_back(ErrorOf(*fit, r));
    }
    if (r.kind == BenchKind::kGemm && r.precision == Precision::kFp8) fp8.push_back(ErrorOf(*fit, r));
    if (IsFa3(r)) fa3.push_back(ErrorOf(*fit, r));
    if (IsFa3Backward(r)) fa3_bwd.push_back(ErrorOf(*fit, r));
  }
  const auto g = Summarise(gemm), gl = Summarise(gemm_large), f8 = Summarise(fp8), fa = Summarise(fa3);
  const auto fb = Summarise(fa3_bwd);
  Print("BF16 GEMM, all", g);
  Print("BF16 GEMM, rows >= 50 us", gl);
  Print("FP8 GEMM", f8);
  Print("FlashAttention-3 forward", fa);
  Print("FlashAttention-3 backward (heads 64, 128)", fb);
  EXPECT_EQ(g.rows, 376);
  EXPECT_LT(g.median_pct, 8.0);
  EXPECT_LT(gl.median_pct, 8.0);
  EXPECT_LT(gl.worst_pct, 20.0);
  EXPECT_LT(f8.worst_pct, 1e-6);  // one row, one coefficient
  EXPECT_LT(fa.worst_pct, 10.0);
  EXPECT_EQ(fa.rows, 11);
  EXPECT_GT(fit->flash_forward.special, 0.0);
  EXPECT_EQ(fb.rows, 12);
  EXPECT_LT(fb.median_pct, 3.0);
  EXPECT_LT(fb.worst_pct, 6.0);
  EXPECT_GT(fit->flash_backward.special, 0.0);  // a head of 64 pays more per FLOP than one of 128
  // Efficiencies are physical: at most the peak, and the large-GEMM efficiency close to
  // what the largest measured GEMMs reach (about 0.8 of the BF16 peak).
  EXPECT_GE(fit->gemm.compute, 1.0);
  EXPECT_GT(1 / fit->gemm.compute, 0.7);
  EXPECT_NEAR(fit->gemm.ceiling, 808.699906572796 / 989.4, 1e-9);  // the fastest XLA row
  EXPECT_GE(fit->gemm_fp8.compute, 1.0);
}

// Without the exponentials' term the backward cannot tell a head of 64 from one of 128: the
// FLOPs, bytes and per-row work scale alike, so both sizes get one efficiency.
TEST(KernelFit, TheExponentialsTermSeparatesHeadSizes) {
  KernelFitSetup without;
  without.fit_special = false;
  auto with_fit = FitKernels(Embedded(), KernelFitSetup{});
  auto without_fit = FitKernels(Embedded(), without);
  ASSERT_TRUE(with_fit.ok() && without_fit.ok());
  std::vector<RowError> with_errors, without_errors;
  for (const KernelBenchRow& r : Embedded()) {
    if (!IsFa3Backward(r)) continue;
    with_errors.push_back(ErrorOf(*with_fit, r));
    without_errors.push_back(ErrorOf(*without_fit, r));
  }
  const auto w = Summarise(with_errors), wo = Summarise(without_errors);
  Print("FA3 backward, with the exponentials", w);
  Print("FA3 backward, without", wo);
  EXPECT_LT(w.median_pct, wo.median_pct);
  EXPECT_GT(wo.median_pct, 5.0);
}

// Every row of one GEMM size (m) held out of the fit and predicted, for each m in turn;
// m = 256 and 4096 are extrapolations. FlashAttention likewise per sequence length (512 and
// 16K are extrapolations).
TEST(KernelFit, HeldOutSizes) {
  const std::vector<KernelBenchRow> rows = Embedded();
  std::vector<RowError> gemm, gemm_large, fa3;
  for (std::int64_t m : {256, 512, 1024, 2048, 4096}) {
    KernelFitSetup setup;
    setup.use = [m](const KernelBenchRow& r) { return !(IsGemmBf16(r) && r.m == m); };
    auto fit = FitKernels(rows, setup);
    ASSERT_TRUE(fit.ok()) << fit.status();
    std::vector<RowError> these;
    for (const KernelBenchRow& r : rows) {
      if (!IsGemmBf16(r) || r.m != m) continue;
      these.push_back(ErrorOf(*fit, r));
      gemm.push_back(these.back());
      if (r.MeasuredSeconds() >= 50e-6) gemm_large.push_back(these.back());
    }
    Print(("BF16 GEMM, m = " + std::to_string(m) + " held out").c_str(), Summarise(these));
  }
  std::vector<RowError> fa3_bwd;
  for (std::int64_t s : {512, 1024, 2048, 4096, 8192, 16384}) {
    KernelFitSetup setup;
    setup.use = [s](const KernelBenchRow& r) { return !((IsFa3(r) || IsFa3Backward(r)) && r.n == s); };
    auto fit = FitKernels(rows, setup);
    ASSERT_TRUE(fit.ok()) << fit.status();
    for (const KernelBenchRow& r : rows) {
      if (IsFa3(r) && r.n == s) fa3.push_back(ErrorOf(*fit, r));
      if (IsFa3Backward(r) && r.n == s) fa3_bwd.push_back(ErrorOf(*fit, r));
    }
  }
  const auto g = Summarise(gemm), gl = Summarise(gemm_large), fa = Summarise(fa3), fb = Summarise(fa3_bwd);
  Print("BF16 GEMM, each m held out in turn", g);
  Print("  rows >= 50 us", gl);
  Print("FlashAttention-3 forward, each length held out", fa);
  Print("FlashAttention-3 backward, each length held out", fb);
  // Another source's FlashAttention-3 forward (pytorch/benchmark #2391), never fitted.
  auto fit = FitKernels(rows, KernelFitSetup{});
  ASSERT_TRUE(fit.ok());
  std::vector<RowError> other;
  for (const KernelBenchRow& r : rows) {
    if (r.impl == "fa3_tritonbench") other.push_back(ErrorOf(*fit, r));
  }
  const auto o = Summarise(other);
  Print("FA3 forward as pytorch/benchmark measured it", o);
  EXPECT_EQ(o.rows, 6);
  EXPECT_LT(o.worst_pct, 10.0);
  EXPECT_EQ(fb.rows, 12);
  EXPECT_LT(fb.median_pct, 4.0);
  EXPECT_LT(fb.worst_pct, 12.0);
  EXPECT_EQ(g.rows, 376);  // with the MAMF row (m = 2048)
  EXPECT_LT(g.median_pct, 10.0);
  EXPECT_LT(gl.median_pct, 10.0);
  EXPECT_LT(gl.worst_pct, 25.0);
  EXPECT_EQ(fa.rows, 11);
  EXPECT_LT(fa.median_pct, 3.0);
  EXPECT_LT(fa.worst_pct, 15.0);
}

// Causal attention, never fitted: the paper's causal forward at head 64, costed as the
// non-causal fit on half the FLOPs and half the exponentials. Short sequences lose more to
// the diagonal's partly masked tiles than that accounts for.
TEST(KernelFit, CausalForwardPredictedFromTheNonCausalFit) {
  auto fit = FitKernels(Embedded(), KernelFitSetup{});
  ASSERT_TRUE(fit.ok());
  std::vector<RowError> all, long_ones;
  for (const KernelBenchRow& r : Embedded()) {
    if (r.kind != BenchKind::kFlashForward || r.impl != "fa3" || !r.causal) continue;
    all.push_back(ErrorOf(*fit, r));
    if (r.n >= 4096) long_ones.push_back(ErrorOf(*fit, r));
  }
  const auto a = Summarise(all), l = Summarise(long_ones);
  Print("FA3 causal forward (head 64), predicted", a);
  Print("  4K tokens or more", l);
  EXPECT_EQ(a.rows, 6);
  EXPECT_LT(l.worst_pct, 15.0);
}

// The H100 fit, asked about an H200 (same compute, 4.8 TB/s HBM3e), against the largest
// measured GEMMs of a GH200 (its H200-class GPU): a device the fit never saw.
TEST(KernelFit, PredictsAnH200ClassDevice) {
  auto fit = FitKernels(Embedded(), KernelFitSetup{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  auto gh200 = ReadKernelBenchFile(TESTBED_GH200_KERNELS_CSV);
  ASSERT_TRUE(gh200.ok()) << gh200.status();
  KernelFit h200 = *fit;
  h200.setup.bandwidth_bytes_per_s = 4800e9;
  std::vector<RowError> errors;
  for (const KernelBenchRow& r : *gh200) errors.push_back(ErrorOf(h200, r));
  const auto s = Summarise(errors);
  Print("GH200 (H200-class) GEMMs, H100 fit", s);
  EXPECT_EQ(s.rows, 2);
  EXPECT_LT(s.worst_pct, 10.0);
}

// Closed forms: an FP8 GEMM costs its FLOPs at the FP8 peak over the fitted FP8 efficiency
// plus the GEMM traffic and overhead terms; FlashAttention's backward its own fitted terms on
// its FLOPs, exponentials and bytes; a memory-bound kernel its bytes at the given fraction of
// the bandwidth.
// Memory-bound kernels at measured bandwidth: tuned reductions (QuACK's, cuDNN's RMSNorm) on
// an H100 SXM reach 2.89-3.03 of its 3.35 TB/s in two sources. The fit (one coefficient on
// the relative error) puts the efficiency among them, predicts each fitted row within 5% and
// each row of one source from the other's alone within 6%; torch.compile's softmax at a 262K
// reduction (never fitted) runs at 1.89 TB/s, well below. The model prices a memory-bound
// kernel at the fitted efficiency unless memory_efficiency is given, and at 0.8 where the
// data has no memory rows.
TEST(KernelFit, MemoryBoundKernelsAtMeasuredBandwidth) {
  const std::vector<KernelBenchRow> rows = Embedded();
  auto fit = FitKernels(rows, KernelFitSetup{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->memory_rows, 4);
  const double efficiency = fit->MemoryEfficiency(0);
  EXPECT_GT(efficiency, 2.89 / 3.35);
  EXPECT_LT(efficiency, 3.03 / 3.35);
  std::printf("memory-bound kernels: fitted efficiency %.3f (%.2f TB/s of 3.35)\n", efficiency, efficiency * 3.35);
  for (const KernelBenchRow& r : rows) {
    if (r.kind != BenchKind::kMemory) continue;
    const double err = std::abs(fit->Predict(r) - r.MeasuredSeconds()) / r.MeasuredSeconds();
    std::printf("  %-14s %-5s %6lld x %6lld: %.2f TB/s measured, %.2f predicted (%.1f%%)\n", r.impl.c_str(),
                PrecisionName(r.precision), static_cast<long long>(r.b), static_cast<long long>(r.n),
                r.measured_tb_per_s, r.Bytes() / fit->Predict(r) / 1e12, 100 * err);
    if (r.impl == "torch_compile") {
      EXPECT_GT(err, 0.3);  // a less tuned kernel: the fit is for tuned ones
    } else {
      EXPECT_LT(err, 0.05);
    }
  }
  for (const char* held : {"quack_blog", "accrl_rmsnorm"}) {
    KernelFitSetup setup;
    setup.use = [held](const KernelBenchRow& r) { return r.kind != BenchKind::kMemory || r.source != held; };
    auto other = FitKernels(rows, setup);
    ASSERT_TRUE(other.ok()) << other.status();
    for (const KernelBenchRow& r : rows) {
      if (r.kind != BenchKind::kMemory || r.source != held || r.impl == "torch_compile") continue;
      EXPECT_LT(std::abs(other->Predict(r) - r.MeasuredSeconds()) / r.MeasuredSeconds(), 0.06) << held << " " << r.impl;
    }
  }
  DeviceSpec h100;
  h100.name = "h100-sxm";
  h100.peak_flops = {{Precision::kBf16, 989.4e12}};
  h100.memory_bandwidth_bytes_per_s = 3350e9;
  const Kernel norm{"layernorm", KernelKind::kMemory, 0.0, 1e9, Precision::kBf16};
  auto fitted = KernelCalibratedModel(*fit, KernelModelOptions{}).Time(norm, h100);
  ASSERT_TRUE(fitted.ok());
  EXPECT_DOUBLE_EQ(*fitted, 1e9 / (3350e9 * efficiency) + fit->gemm.overhead_s);
  KernelFitSetup none;
  none.use = [](const KernelBenchRow& r) { return r.kind != BenchKind::kMemory; };
  auto without = FitKernels(rows, none);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->memory_rows, 0);
  auto unfitted = KernelCalibratedModel(*without, KernelModelOptions{}).Time(norm, h100);
  ASSERT_TRUE(unfitted.ok());
  EXPECT_DOUBLE_EQ(*unfitted, 1e9 / (3350e9 * kUnfittedMemoryEfficiency) + fit->gemm.overhead_s);
}

TEST(KernelModel, PricesKernelsByTheirClosedForms) {
  auto fit = FitKernels(Embedded(), KernelFitSetup{});
  ASSERT_TRUE(fit.ok()) << fit.status();
  const KernelCalibratedModel model(*fit, KernelModelOptions{0.75});
  DeviceSpec h100;
  h100.name = "h100-sxm";
  h100.peak_flops = {{Precision::kBf16, 989.4e12}, {Precision::kFp8, 1978.9e12}};
  h100.memory_bandwidth_bytes_per_s = 3350e9;
  const double f = 2.0 * 8192 * 16384 * 8192, bytes = 8192.0 * 8192 + 8192.0 * 16384 + 2.0 * 8192 * 16384;
  auto fp8 = model.Time(Kernel{"fc1", KernelKind::kGemm, f, bytes, Precision::kFp8}, h100);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  // A GEMM this large runs at the FP8 class's ceiling, the best fraction of the peak measured.
  EXPECT_DOUBLE_EQ(*fp8, std::max(fit->gemm_fp8.compute * f / 1978.9e12 + fit->gemm.traffic * bytes / 3350e9 +
                                      fit->gemm.overhead_s,
                                  f / (1978.9e12 * fit->gemm_fp8.ceiling)));
  EXPECT_DOUBLE_EQ(fit->gemm_fp8.ceiling, 1402.6 / 1978.9);
  auto bf16 = model.Time(Kernel{"fc1", KernelKind::kGemm, f, bytes, Precision::kBf16}, h100);
  ASSERT_TRUE(bf16.ok());
  EXPECT_LT(*fp8, *bf16);
  const double fa = 4.0 * 2 * 8 * 8192.0 * 8192 * 128, qkvo = 2.0 * 4 * 2 * 8192 * 8 * 128;
  const double exps = 2.0 * 8 * 8192.0 * 8192;
  Kernel backward{"flash_attention_backward", KernelKind::kBatchedGemm, 2.5 * fa, 2 * qkvo, Precision::kBf16};
  backward.special_ops = exps;
  auto bwd = model.Time(backward, h100);
  ASSERT_TRUE(bwd.ok());
  EXPECT_DOUBLE_EQ(*bwd, std::max(fit->flash_backward.compute * 2.5 * fa / 989.4e12 +
                                      fit->flash_backward.special * exps / 989.4e12 +
                                      fit->flash_backward.traffic * 2 * qkvo / 3350e9 + fit->gemm.overhead_s,
                                  2.5 * fa / (989.4e12 * fit->flash_backward.ceiling)));
  auto mem = model.Time(Kernel{"layernorm", KernelKind::kMemory, 0.0, 1e9, Precision::kBf16}, h100);
  ASSERT_TRUE(mem.ok());
  EXPECT_DOUBLE_EQ(*mem, 1e9 / (3350e9 * 0.75) + fit->gemm.overhead_s);
  DeviceSpec no_fp8 = h100;
  no_fp8.peak_flops.erase(Precision::kFp8);
  auto refused = model.Time(Kernel{"fc1", KernelKind::kGemm, f, bytes, Precision::kFp8}, no_fp8);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no fp8 peak"), std::string::npos) << refused.status();
}

// FlashAttention-2 (the same paper's bars) as the ablation against FlashAttention-3: slower
// per FLOP forward and backward, both fitted on its own rows.
TEST(KernelFit, FlashAttention2IsItsOwnFit) {
  KernelFitSetup fa2;
  fa2.flash_impl = "fa2";
  auto two = FitKernels(Embedded(), fa2);
  auto three = FitKernels(Embedded(), KernelFitSetup{});
  ASSERT_TRUE(two.ok() && three.ok()) << two.status();
  EXPECT_EQ(two->flash_forward_rows, 12);
  EXPECT_EQ(two->flash_backward_rows, 12);
  std::vector<RowError> errors;
  for (const KernelBenchRow& r : Embedded()) {
    if (r.impl == "fa2" && !r.causal) errors.push_back(ErrorOf(*two, r));
  }
  const auto s = Summarise(errors);
  Print("FlashAttention-2 forward and backward", s);
  EXPECT_LT(s.median_pct, 3.0);
  EXPECT_LT(two->flash_forward.ceiling, three->flash_forward.ceiling);
  EXPECT_LT(two->flash_backward.ceiling, three->flash_backward.ceiling);
}

TEST(KernelFit, RefusesTooFewRows) {
  std::vector<KernelBenchRow> rows = Embedded();
  KernelFitSetup setup;
  setup.flash_impl = "fa9";
  auto fit = FitKernels(rows, setup);
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(fit.status().message().find("FlashAttention forward (fa9)"), std::string::npos) << fit.status();
}

TEST(KernelPlugin, LoadsAndCostsALlamaLayer) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(TESTBED_CALIBRATED_PLUGIN);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ComponentEntry* entry = registry.Find(ComponentKind::kDeviceModel, "calibrated.kernels");
  ASSERT_NE(entry, nullptr);
  ParamSet ps;
  for (const ParamSpec& spec : entry->decl.params) {
    ps.Set(spec.name(), spec.default_value());
    EXPECT_FALSE(spec.doc().empty()) << spec.name();
  }
  auto model = registry.Create<DeviceModel>("calibrated.kernels", ps);
  ASSERT_TRUE(model.ok()) << model.status();
  Layer attention;
  attention.name = "attn";
  attention.kind = LayerKind::kAttention;
  attention.hidden = 16384;
  attention.heads = 128;
  attention.kv_heads = 8;
  attention.seq_len = 8192;
  attention.flash_attention = true;
  attention.causal = true;
  DeviceSpec h100;
  h100.name = "h100-sxm";
  h100.peak_flops = {{Precision::kBf16, 989.4e12}, {Precision::kFp8, 1978.9e12}};
  h100.memory_bandwidth_bytes_per_s = 3350e9;
  LayerWork work{&attention, Phase::kForward, 1, 8, true, Precision::kBf16};
  auto t = (*model)->LayerTime(work, h100);
  ASSERT_TRUE(t.ok()) << t.status();
  double expected = 0;
  const KernelCalibratedModel& direct = dynamic_cast<const KernelCalibratedModel&>(**model);
  for (const Kernel& k : LayerKernels(work)) expected += *direct.Time(k, h100);
  EXPECT_DOUBLE_EQ(*t, expected);
  ps.Set("measurements", std::string("/nonexistent/h100.csv"));
  auto bad = registry.Create<DeviceModel>("calibrated.kernels", ps);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/nonexistent/h100.csv"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace testbed::calibrated
