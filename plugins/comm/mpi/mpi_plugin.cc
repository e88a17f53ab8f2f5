// Plugin "mpi": the `mpi` communicator (one rank per MPI process).
#include "mpi_communicator.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::mpi {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Communicator>(
      "mpi", "one rank per MPI process (mpirun -np N); non-blocking MPI collectives polled against a deadline",
      {
          ParamSpec::Double("timeout_s", 120.0)
              .Range(0.001, 86400)
              .Unit("s")
              .Doc("an operation whose peers have not all joined by then fails, naming them"),
          ParamSpec::Bool("track_arrivals", true)
              .Doc("send each peer a tiny note per collective so that a timeout can name the absent ranks"),
          ParamSpec::Choice("all_reduce", "library", {"library", "ring"})
              .Doc("library: OpenMPI's MPI_Iallreduce (its own choice of algorithm); ring: the communicator's "
                   "reduce-scatter + all-gather ring over point-to-point messages"),
          ParamSpec::Int("ring_segment_bytes", 256 << 10)
              .Range(64, 1 << 30)
              .Unit("bytes")
              .Doc("all_reduce = \"ring\": the ring streams each chunk in messages of this size"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        TESTBED_ASSIGN_OR_RETURN(double timeout_s, ps.Get<double>("timeout_s"));
        TESTBED_ASSIGN_OR_RETURN(bool track, ps.Get<bool>("track_arrivals"));
        const absl::StatusOr<std::string> algorithm = ps.Get<std::string>("all_reduce");
        if (!algorithm.ok()) return algorithm.status();
        AllReduceSettings all_reduce;
        all_reduce.algorithm =
            *algorithm == "ring" ? AllReduceSettings::Algorithm::kRing : AllReduceSettings::Algorithm::kLibrary;
        TESTBED_ASSIGN_OR_RETURN(all_reduce.segment_bytes, ps.Get<std::int64_t>("ring_segment_bytes"));
        return std::make_unique<MpiCommunicator>(timeout_s, track, all_reduce);
      });
}

}  // namespace
}  // namespace testbed::mpi

TESTBED_PLUGIN("mpi", "1.0.0", "MPI communicator: one rank per process, OpenMPI underneath", testbed::mpi::Register)
