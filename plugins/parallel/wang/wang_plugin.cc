// Plugin "parallel_wang": the overlap of Wang et al. (ASPLOS 2023, "Overlap communication with
// dependent computation via decomposition in large deep learning models") as a scheduler,
// the Oases paper's third baseline. Each tensor-parallel op's collective is decomposed into
// `chunks` parts, each reduced while the GEMM computes the next part; the next op starts
// once the whole result is reduced, so the last part's collective stays exposed and nothing
// overlaps across ops. Recomputation repeats the forward collectives (Megatron-LM's).
#include "testbed/pipeline_program.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::wang {
namespace {

class Decomposed final : public Scheduler {
 public:
  explicit Decomposed(ExpandOptions o) : o_(o) {}
  absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    return ExpandOneFOneB(ctx, o_, "wang.decomposed");
  }

 private:
  ExpandOptions o_;
};

absl::Status Register(Registry& r) {
  std::vector<ParamSpec> params;
  for (ParamSpec& spec : ExpandOptionParams()) {
    const std::string& n = spec.name();
    if (n == "tp_chunks" || n == "tp_overlap" || n == "tp_chunk_join" || n == "recompute_collectives") continue;
    params.push_back(std::move(spec));
  }
  params.push_back(ParamSpec::Int("chunks", 4).Range(2, 16).Doc("parts each op's collective is decomposed into"));
  return r.Add<Scheduler>(
      "wang.decomposed", "Wang et al. (ASPLOS 2023): each collective decomposed into parts fused with its GEMM",
      std::move(params), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
        TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t chunks, p.Get<std::int64_t>("chunks"));
        o.tp_chunks = static_cast<int>(chunks);
        o.tp_overlap = true;
        o.tp_chunk_join = true;
        o.recompute_collectives = true;
        return std::make_unique<Decomposed>(o);
      });
}

}  // namespace
}  // namespace testbed::wang

TESTBED_PLUGIN("parallel_wang", "1.0.0", "Wang et al.: collectives decomposed and overlapped with their GEMMs",
               testbed::wang::Register)
