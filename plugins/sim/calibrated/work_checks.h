// Checks the device models of this plugin make before costing work: the layer work is
// possible (micro-batch, TP degree dividing the heads or FFN width, fraction) and the device
// preset has what the cost needs (a peak for the precision, a memory bandwidth). `model`
// names the device model in the error.
#pragma once

#include "absl/status/status.h"
#include "testbed/device_model.h"
#include "testbed/device_spec.h"

namespace testbed::calibrated {

[[nodiscard]] absl::Status CheckLayerWork(const LayerWork& work, const char* model);
[[nodiscard]] absl::Status CheckDeviceFor(const DeviceSpec& device, Precision precision, bool needs_peak,
                                          const char* model);

}  // namespace testbed::calibrated
