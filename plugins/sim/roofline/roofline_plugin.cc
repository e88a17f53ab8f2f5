// Plugin "roofline": the `roofline` device model.
#include "roofline_model.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::roofline {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<DeviceModel>(
      "roofline", "per kernel: max(FLOPs / (peak x size-dependent efficiency), bytes / (bandwidth x efficiency)) + launch",
      {
          ParamSpec::Double("gemm_efficiency", 0.7).Range(0.01, 1).Doc("fraction of peak a large GEMM reaches"),
          ParamSpec::Double("batched_gemm_efficiency", 0.5).Range(0.01, 1).Doc("fraction of peak for per-head attention GEMMs"),
          ParamSpec::Double("gemm_half_gflops", 1.0).Min(0).Unit("GFLOP").Doc("GEMM size at half the large-size efficiency"),
          ParamSpec::Double("memory_efficiency", 0.8).Range(0.01, 1).Doc("fraction of memory bandwidth reached"),
          ParamSpec::Double("launch_overhead_us", 5.0).Min(0).Unit("us").Doc("fixed cost per kernel"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<DeviceModel>> {
        RooflineParams p;
        TESTBED_ASSIGN_OR_RETURN(p.gemm_efficiency, ps.Get<double>("gemm_efficiency"));
        TESTBED_ASSIGN_OR_RETURN(p.batched_gemm_efficiency, ps.Get<double>("batched_gemm_efficiency"));
        TESTBED_ASSIGN_OR_RETURN(p.gemm_half_gflops, ps.Get<double>("gemm_half_gflops"));
        TESTBED_ASSIGN_OR_RETURN(p.memory_efficiency, ps.Get<double>("memory_efficiency"));
        TESTBED_ASSIGN_OR_RETURN(double launch_us, ps.Get<double>("launch_overhead_us"));
        p.launch_overhead_s = launch_us * 1e-6;
        return std::make_unique<RooflineModel>(p);
      });
}

}  // namespace
}  // namespace testbed::roofline

TESTBED_PLUGIN("roofline", "1.0.0", "roofline device model", testbed::roofline::Register)
