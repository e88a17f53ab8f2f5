// Plugin "calibrated": two device models fitted when they are created. `calibrated` on
// measured per-layer op times (the embedded RTX 3090 file or a CSV of its layout);
// `calibrated.kernels` on published kernel benchmarks (the embedded H100 SXM file or a CSV
// of its layout).
#include "calibrated_model.h"
#include "kernel_model.h"
#include "measurements.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::calibrated {
namespace {

absl::StatusOr<std::unique_ptr<DeviceModel>> Make(const ParamSet& ps) {
  TESTBED_ASSIGN_OR_RETURN(std::string path, ps.Get<std::string>("measurements"));
  CalibrationSetup setup;
  TESTBED_ASSIGN_OR_RETURN(setup.device, ps.Get<std::string>("device"));
  TESTBED_ASSIGN_OR_RETURN(double peak_tflops, ps.Get<double>("device_peak_tflops"));
  TESTBED_ASSIGN_OR_RETURN(double bandwidth_gb_per_s, ps.Get<double>("device_memory_bandwidth_gb_per_s"));
  TESTBED_ASSIGN_OR_RETURN(setup.seq_len, ps.Get<std::int64_t>("seq_len"));
  TESTBED_ASSIGN_OR_RETURN(setup.head_dim, ps.Get<std::int64_t>("head_dim"));
  setup.peak_flops = peak_tflops * 1e12;
  setup.bandwidth_bytes_per_s = bandwidth_gb_per_s * 1e9;

  absl::StatusOr<std::vector<Measurement>> rows =
      path.empty() ? ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName)
                   : ReadMeasurementsFile(path);
  if (!rows.ok()) return rows.status();
  TESTBED_ASSIGN_OR_RETURN(Calibration calibration, FitCalibration(*rows, setup));
  return std::make_unique<CalibratedModel>(std::move(calibration));
}

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeKernels(const ParamSet& ps) {
  TESTBED_ASSIGN_OR_RETURN(std::string path, ps.Get<std::string>("measurements"));
  KernelFitSetup setup;
  TESTBED_ASSIGN_OR_RETURN(setup.device, ps.Get<std::string>("device"));
  TESTBED_ASSIGN_OR_RETURN(double bf16_tflops, ps.Get<double>("device_peak_bf16_tflops"));
  TESTBED_ASSIGN_OR_RETURN(double fp8_tflops, ps.Get<double>("device_peak_fp8_tflops"));
  TESTBED_ASSIGN_OR_RETURN(double bandwidth_gb_per_s, ps.Get<double>("device_memory_bandwidth_gb_per_s"));
  TESTBED_ASSIGN_OR_RETURN(setup.flash_impl, ps.Get<std::string>("flash_impl"));
  KernelModelOptions options;
  TESTBED_ASSIGN_OR_RETURN(options.memory_efficiency, ps.Get<double>("memory_efficiency"));
  setup.peak_bf16_flops = bf16_tflops * 1e12;
  setup.peak_fp8_flops = fp8_tflops * 1e12;
  setup.bandwidth_bytes_per_s = bandwidth_gb_per_s * 1e9;
  absl::StatusOr<std::vector<KernelBenchRow>> rows =
      path.empty() ? ParseKernelBench(EmbeddedKernelBenchCsv(), kEmbeddedKernelBenchName) : ReadKernelBenchFile(path);
  if (!rows.ok()) return rows.status();
  TESTBED_ASSIGN_OR_RETURN(KernelFit fit, FitKernels(*rows, setup));
  return std::make_unique<KernelCalibratedModel>(std::move(fit), options);
}

absl::Status RegisterKernels(Registry& r) {
  return r.Add<DeviceModel>(
      "calibrated.kernels",
      "per kernel class FLOPs / (peak x eta) + bytes / (bandwidth x eta) + overhead, fitted on published kernel "
      "benchmarks (GEMM by shape and precision, FlashAttention by sequence length)",
      {
          ParamSpec::String("measurements", "")
              .Doc("CSV of kernel benchmarks (layout of h100_sxm_kernels.csv); empty: the embedded H100 SXM file"),
          ParamSpec::String("device", "h100-sxm").Doc("device the benchmarks were run on"),
          ParamSpec::Double("device_peak_bf16_tflops", 989.4)
              .Min(1e-3)
              .Unit("TFLOP/s")
              .Doc("that device's dense BF16/FP16 tensor peak"),
          ParamSpec::Double("device_peak_fp8_tflops", 1978.9).Min(1e-3).Unit("TFLOP/s").Doc("its dense FP8 tensor peak"),
          ParamSpec::Double("device_memory_bandwidth_gb_per_s", 3350.0)
              .Min(1e-3)
              .Unit("GB/s")
              .Doc("its memory bandwidth (datasheet)"),
          ParamSpec::String("flash_impl", "fa3")
              .Doc("FlashAttention implementation whose rows are fitted: fa3 (FlashAttention-3) or fa2 (FlashAttention-2)"),
          ParamSpec::Double("memory_efficiency", 0.0)
              .Range(0.0, 1.0)
              .Doc("fraction of the memory bandwidth memory-bound kernels reach; 0: fitted on the data's memory rows "
                   "(tuned normalisation and softmax kernels), 0.8 where it has none"),
      },
      MakeKernels);
}

absl::Status Register(Registry& r) {
  if (absl::Status st = RegisterKernels(r); !st.ok()) return st;
  return r.Add<DeviceModel>(
      "calibrated",
      "per kernel FLOPs / (peak x eta) + bytes / (bandwidth x eta) + overhead, eta fitted on measured layer times",
      {
          ParamSpec::String("measurements", "")
              .Doc("CSV of measured layer op times (layout of rtx3090_transformer_ops.csv); empty: the embedded RTX 3090 file"),
          ParamSpec::String("device", "rtx3090").Doc("device the measurements were taken on"),
          ParamSpec::Double("device_peak_tflops", 71.0)
              .Min(1e-3)
              .Unit("TFLOP/s")
              .Doc("that device's dense peak at the measured precision (fp16, fp32 accumulate)"),
          ParamSpec::Double("device_memory_bandwidth_gb_per_s", 936.2)
              .Min(1e-3)
              .Unit("GB/s")
              .Doc("that device's memory bandwidth"),
          ParamSpec::Int("seq_len", 1024).Range(1, 1 << 20).Unit("tokens").Doc("sequence length of the measurements"),
          ParamSpec::Int("head_dim", 64).Range(1, 1 << 16).Doc("hidden size per attention head in the measurements"),
      },
      Make);
}

}  // namespace
}  // namespace testbed::calibrated

TESTBED_PLUGIN("calibrated", "1.1.0", "device models calibrated on measured per-layer op times and on published kernel benchmarks",
               testbed::calibrated::Register)
