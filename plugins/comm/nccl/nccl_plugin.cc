// Plugin "nccl": the `nccl` communicator (one rank per GPU of this process).
#include "nccl_communicator.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::nccl {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Communicator>(
      "nccl", "one rank per GPU of this process; NCCL collectives on per-rank CUDA streams, polled against a deadline",
      {
          ParamSpec::Double("timeout_s", 120.0)
              .Range(0.001, 86400)
              .Unit("s")
              .Doc("an operation whose peers have not all joined by then fails, naming them"),
          ParamSpec::Bool("host_buffers", false)
              .Doc("take host buffers and stage them through GPU memory (for the executor, which trains on the "
                   "CPU); false: buffers are device memory, as in NCCL"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        TESTBED_ASSIGN_OR_RETURN(double timeout_s, ps.Get<double>("timeout_s"));
        TESTBED_ASSIGN_OR_RETURN(bool host_buffers, ps.Get<bool>("host_buffers"));
        return std::make_unique<NcclCommunicator>(timeout_s, host_buffers);
      });
}

}  // namespace
}  // namespace testbed::nccl

TESTBED_PLUGIN("nccl", "1.0.0", "NCCL communicator: one rank per GPU", testbed::nccl::Register)
