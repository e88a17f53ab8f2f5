// Plugin "megatron": Megatron-LM's baseline planning.
#include "testbed/plugin.h"
#include "uniform_partitioner.h"

namespace testbed::megatron {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Partitioner>(
      "megatron.uniform",
      "Megatron-LM: degrees from [parallel], transformer blocks split evenly over pipeline stages and chunks", {},
      [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        return std::make_unique<UniformPartitioner>();
      });
}

}  // namespace
}  // namespace testbed::megatron

TESTBED_PLUGIN("megatron", "1.0.0", "Megatron-LM baselines: uniform pipeline partition", testbed::megatron::Register)
