// Plugin "calibrated": the `calibrated` device model, fitted when it is created on the
// embedded RTX 3090 measurements or on a CSV file of the same layout.
#include "calibrated_model.h"
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

absl::Status Register(Registry& r) {
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

TESTBED_PLUGIN("calibrated", "1.0.0", "device model calibrated on measured per-layer op times",
               testbed::calibrated::Register)
