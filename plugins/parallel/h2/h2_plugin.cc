// Plugin "h2": H2's heterogeneous pipeline planners (HyperHetero: LLM training on 1,000+
// chips of several vendors): HeteroPP (non-uniform stages per chip type) and HeteroAuto (its
// two-stage search).
#include "h2_partitioners.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::h2 {
namespace {

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "h2.hetero_pp",
      "HeteroPP: stage groups per chip type as given, layers split by each chip's speed and memory",
      {ParamSpec::StringList("order", {}).Doc("chip types (device preset names) along the pipeline; empty: the "
                                              "cluster's group order"),
       ParamSpec::IntList("stages", {}).Doc("pipeline stages per chip type of `order`; empty: chips / (tp x dp)"),
       ParamSpec::IntList("tp", {}).Doc("tensor-parallel degree per chip type; empty: [parallel] tp"),
       ParamSpec::IntList("dp", {}).Doc("data-parallel degree per chip type; empty: [parallel] dp (0: 1)"),
       ParamSpec::IntList("units", {}).Doc("model units (embedding, blocks, head) per stage; empty: HeteroPP's split")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        HeteroPpSettings s;
        TESTBED_ASSIGN_OR_RETURN(s.order, p.Get<std::vector<std::string>>("order"));
        TESTBED_ASSIGN_OR_RETURN(s.stages, p.Get<std::vector<std::int64_t>>("stages"));
        TESTBED_ASSIGN_OR_RETURN(s.tp, p.Get<std::vector<std::int64_t>>("tp"));
        TESTBED_ASSIGN_OR_RETURN(s.dp, p.Get<std::vector<std::int64_t>>("dp"));
        TESTBED_ASSIGN_OR_RETURN(s.units, p.Get<std::vector<std::int64_t>>("units"));
        return std::make_unique<HeteroPp>(std::move(s));
      }));
  return r.Add<Partitioner>(
      "h2.hetero_auto",
      "HeteroAuto: searches chip-type order, DP and per-type TP (stage groups), splits the layers, simulates the "
      "finalists",
      {ParamSpec::Int("finalists", 4).Range(1, 64).Doc("best layouts by the cost model handed to the simulator"),
       ParamSpec::Bool("search_order", true).Doc("try every order of the chip types along the pipeline")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        SearchOptions o;
        TESTBED_ASSIGN_OR_RETURN(std::int64_t f, p.Get<std::int64_t>("finalists"));
        o.finalists = static_cast<int>(f);
        TESTBED_ASSIGN_OR_RETURN(o.search_order, p.Get<bool>("search_order"));
        return std::make_unique<HeteroAuto>(o);
      });
}

}  // namespace
}  // namespace testbed::h2

TESTBED_PLUGIN("h2", "1.0.0", "H2's heterogeneous pipeline planners (HeteroPP, HeteroAuto)", testbed::h2::Register)
