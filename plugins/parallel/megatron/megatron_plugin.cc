// Plugin "megatron": Megatron-LM's baseline planning and schedules.
#include "schedulers.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"
#include "uniform_partitioner.h"
#include "uniform_tp.h"

namespace testbed::megatron {
namespace {

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "megatron.uniform",
      "Megatron-LM: transformer blocks split evenly over pipeline stages and chunks",
      {ParamSpec::Bool("search", false)
           .Doc("search TP, PP, DP, micro-batch size and recomputation for the fastest plan that fits; "
                "otherwise take them from [parallel] and [train]")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        TESTBED_ASSIGN_OR_RETURN(bool search, p.Get<bool>("search"));
        return std::make_unique<UniformPartitioner>(search);
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<TpPlanner>(
      "megatron.uniform_tp", "Megatron-LM: one tensor-parallel degree for every layer, the fastest that fits",
      {ParamSpec::Int("degree", 0).Range(0, 1 << 20)
           .Unit("devices")
           .Doc("the degree; 0: each power of two dividing the stage's devices simulated, the fastest that fits taken")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<TpPlanner>> {
        TESTBED_ASSIGN_OR_RETURN(std::int64_t degree, p.Get<std::int64_t>("degree"));
        return std::make_unique<UniformTp>(static_cast<int>(degree));
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<Scheduler>(
      "1f1b", "1F1B (PipeDream-Flush), Megatron-LM's default pipeline schedule", ExpandOptionParams(),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
        TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
        return std::make_unique<OneFOneB>(o);
      }));
  return r.Add<Scheduler>(
      "interleaved_1f1b", "Megatron-LM's interleaved 1F1B over virtual stages ([parallel] virtual_stages)",
      ExpandOptionParams(), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
        TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
        return std::make_unique<Interleaved>(o);
      });
}

}  // namespace
}  // namespace testbed::megatron

TESTBED_PLUGIN("megatron", "1.0.0", "Megatron-LM baselines: uniform partition, 1F1B and interleaved schedules",
               testbed::megatron::Register)
