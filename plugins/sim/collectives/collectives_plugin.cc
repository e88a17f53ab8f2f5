// Plugin "collectives": the simulator's collective algorithms (ring, tree, hierarchical) and
// `auto`, which picks the fastest per call.
#include "hierarchical.h"
#include "ring.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"
#include "tree.h"

namespace testbed::collectives {
namespace {

std::vector<ParamSpec> TuningParams() {
  return {
      ParamSpec::Double("efficiency", 1.0).Range(0.01, 1).Doc("share of each link's bandwidth a collective reaches"),
      ParamSpec::Double("step_latency_us", 0.0).Min(0).Unit("us").Doc("software cost per message step, on top of link latency"),
      ParamSpec::Int("ring_channels", 1)
          .Range(0, 64)
          .Doc("rings a ring collective over several nodes is split into, each leaving the nodes through another "
               "member's NIC (NCCL's channels); 0: one per member of a node"),
  };
}

absl::StatusOr<CommTuning> Tuning(const ParamSet& p) {
  CommTuning t;
  TESTBED_ASSIGN_OR_RETURN(t.efficiency, p.Get<double>("efficiency"));
  TESTBED_ASSIGN_OR_RETURN(double us, p.Get<double>("step_latency_us"));
  t.step_latency_s = us * 1e-6;
  TESTBED_ASSIGN_OR_RETURN(std::int64_t channels, p.Get<std::int64_t>("ring_channels"));
  t.ring_channels = static_cast<int>(channels);
  return t;
}

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Collective>(
      "ring", "ring all-reduce / all-gather / reduce-scatter, chain broadcast, direct all-to-all", TuningParams(),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Collective>> {
        TESTBED_ASSIGN_OR_RETURN(CommTuning t, Tuning(p));
        return std::make_unique<Ring>(t);
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<Collective>(
      "tree", "double binary tree all-reduce (other ops: ring)", TuningParams(),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Collective>> {
        TESTBED_ASSIGN_OR_RETURN(CommTuning t, Tuning(p));
        return std::make_unique<Tree>(t);
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<Collective>(
      "hierarchical", "intra-node reduce-scatter, inter-node all-reduce per rail, intra-node all-gather", TuningParams(),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Collective>> {
        TESTBED_ASSIGN_OR_RETURN(CommTuning t, Tuning(p));
        return std::make_unique<Hierarchical>(t, false);
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<Collective>(
      "vendor_hierarchical",
      "groups spanning vendors: inside each vendor's fabric, then across vendors (H2's heterogeneous all-reduce); "
      "otherwise hierarchical",
      TuningParams(), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Collective>> {
        TESTBED_ASSIGN_OR_RETURN(CommTuning t, Tuning(p));
        return std::make_unique<VendorHierarchical>(t);
      }));
  return r.Add<Collective>(
      "auto",
      "per call, the fastest of ring, tree, hierarchical and vendor_hierarchical on an idle cluster (like NCCL's tuner)",
      TuningParams(), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Collective>> {
        TESTBED_ASSIGN_OR_RETURN(CommTuning t, Tuning(p));
        return std::make_unique<Hierarchical>(t, true);
      });
}

}  // namespace
}  // namespace testbed::collectives

TESTBED_PLUGIN("collectives", "1.0.0", "collective algorithms for the simulator", testbed::collectives::Register)
