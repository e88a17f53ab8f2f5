// Plugin "local": the `local` communicator (ranks as threads of one process).
#include "local_communicator.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::local {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Communicator>(
      "local", "ranks are threads of this process; collectives move data directly through shared memory",
      {
          ParamSpec::Double("timeout_s", 120.0)
              .Range(0.001, 86400)
              .Unit("s")
              .Doc("an operation whose peers have not all joined by then fails, naming them"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        TESTBED_ASSIGN_OR_RETURN(double timeout_s, ps.Get<double>("timeout_s"));
        return std::make_unique<LocalCommunicator>(timeout_s);
      });
}

}  // namespace
}  // namespace testbed::local

TESTBED_PLUGIN("local", "1.0.0", "local communicator: ranks as threads, shared memory", testbed::local::Register)
