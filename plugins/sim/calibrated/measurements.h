// The measurements the calibrated device model is fitted on: per-layer op times of one GPT
// transformer layer (attention and MLP block, forward and backward) for a grid of hidden
// sizes, tensor-parallel degrees and micro-batches, in the CSV layout of
// data/calibration/rtx3090_transformer_ops.csv.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace testbed::calibrated {

// One row. Times are milliseconds as in the file; a negative time means "did not run".
struct Measurement {
  std::int64_t hidden = 0;
  std::int64_t tp = 1;
  std::int64_t micro_batch = 1;
  double attn_fp_ms = -1, attn_bp_ms = -1, mlp_fp_ms = -1, mlp_bp_ms = -1;
  double comm_ms = -1;
  double runtime_memory_mb = -1;
  int line = 0;  // line in the source, for messages
};

// Parses the CSV text. The header must name the columns hidden, tp, micro_batch,
// attn_fp_ms, attn_bp_ms, mlp_fp_ms, mlp_bp_ms (comm_ms and runtime_memory_mb are read when
// present), in any order. `source` names the text in errors ("file.csv:12: ...").
// Errors: InvalidArgument for a missing column, a malformed number or a non-positive size.
[[nodiscard]] absl::StatusOr<std::vector<Measurement>> ParseMeasurements(absl::string_view text,
                                                                         absl::string_view source);

// Reads and parses a file. Errors: NotFound when it cannot be opened, then as above.
[[nodiscard]] absl::StatusOr<std::vector<Measurement>> ReadMeasurementsFile(const std::string& path);

// The CSV embedded into the plugin at build time (data/calibration/rtx3090_transformer_ops.csv),
// so that an installed plugin needs no data file.
[[nodiscard]] absl::string_view EmbeddedMeasurementsCsv();
inline constexpr const char* kEmbeddedMeasurementsName = "rtx3090_transformer_ops.csv (embedded)";

}  // namespace testbed::calibrated
