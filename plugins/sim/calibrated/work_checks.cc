#include "work_checks.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace testbed::calibrated {

absl::Status CheckLayerWork(const LayerWork& work, const char* model) {
  if (work.layer == nullptr) return absl::InvalidArgumentError(absl::StrCat(model, ": layer work without a layer"));
  const Layer& l = *work.layer;
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat(model, ": layer '", l.name, "': ", what));
  };
  if (work.micro_batch < 1) return bad(absl::StrCat("micro_batch ", work.micro_batch, " must be >= 1"));
  if (work.tp < 1) return bad(absl::StrCat("tp ", work.tp, " must be >= 1"));
  if (!(work.fraction > 0 && work.fraction <= 1)) {
    return bad(absl::StrCat("fraction ", work.fraction, " of the micro-batch must be in (0, 1]"));
  }
  if (l.hidden < 1 || l.seq_len < 1) return bad("hidden and seq_len must be >= 1");
  // Megatron splits heads (attention) and the FFN width (MLP, experts) over the TP group.
  if ((l.kind == LayerKind::kAttention) && (l.heads < 1 || l.heads % work.tp != 0)) {
    return bad(absl::StrCat("tp ", work.tp, " does not divide the ", l.heads, " heads"));
  }
  if ((l.kind == LayerKind::kMlp || l.kind == LayerKind::kMoe) && (l.ffn_hidden < 1 || l.ffn_hidden % work.tp != 0)) {
    return bad(absl::StrCat("tp ", work.tp, " does not divide the FFN width ", l.ffn_hidden));
  }
  return absl::OkStatus();
}

absl::Status CheckDeviceFor(const DeviceSpec& device, Precision precision, bool needs_peak, const char* model) {
  if (needs_peak && !(device.PeakFlops(precision) > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(model, ": device '", device.name, "' has no ", PrecisionName(precision), " peak in its preset"));
  }
  if (!(device.memory_bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(model, ": device '", device.name, "' has no memory bandwidth in its preset"));
  }
  return absl::OkStatus();
}

}  // namespace testbed::calibrated
