// `testbed cost`: the modelled time and memory of one transformer layer's ops on a device,
// for checking the cost models by hand (and against measurements such as the RTX 3090 table).
#pragma once

#include <string>

#include "cli/commands.h"

namespace testbed::cli {

struct CostArgs {
  std::string device = "rtx3090";
  std::string cluster;  // default: the usual node of the device
  std::int64_t hidden = 2048;
  std::int64_t heads = 0;  // 0: hidden / 64
  std::int64_t ffn = 0;    // 0: 4 x hidden
  std::int64_t seq = 1024;
  std::int64_t micro_batch = 1;
  int tp = 1;
  bool sequence_parallel = false;
  std::string precision = "fp16";
  std::string device_model = "roofline";
  std::string collective = "auto";
  bool json = false;
};

int Cost(Env& env, const CostArgs& args);

}  // namespace testbed::cli
