// Plugin "trirace": TriRace (Li et al., IEEE TPDS 35(8) 2024, "A Multidimensional Communication
// Scheduling Method for Hybrid Parallel DNN Training") as a scheduler. On PipeDream-2BW's
// asynchronous pipeline (1F1B without a flush, one-step-stale updates, two weight versions)
// with data parallelism, the three kinds of communication are each placed by their true data
// dependencies (3D communication scheduling):
//   - dense gradients are all-reduced bucket by bucket as the last backward of an iteration
//     makes them final, and the update they feed is needed only by the forwards of the
//     iteration after next, so the all-reduce has an iteration to finish;
//   - embedding gradients go sparse, by all-to-all-v to the replicas owning their rows, and
//     an iteration's lookups wait only for the update of the iteration two before (the weight
//     version it runs on), the untouched rows fetched early;
//   - stage-to-stage sends carry the pipeline's critical path.
// Its runtime orders communication by the links it would cross and what is in flight: where
// kinds meet on a link, the pipeline's sends go first, then the sparse exchange, then the
// all-reduce (strict priority per link, Task::priority). The mechanics are the core's; this
// plugin chooses them.
#include "testbed/pipeline_program.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::trirace {
namespace {

class TriRace final : public Scheduler {
 public:
  explicit TriRace(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    return ExpandPipeDream2BW(ctx, o_, true, "trirace");
  }

 private:
  ExpandOptions o_;
};

absl::Status Register(Registry& r) {
  std::vector<ParamSpec> params = ExpandOptionParams();
  params.push_back(ParamSpec::Bool("sparse_embedding", true)
                       .Doc("embedding gradients by all-to-all-v to the rows' owners (needs an untied head); false: "
                            "all-reduced with the dense gradients"));
  params.push_back(ParamSpec::Bool("link_priority", true)
                       .Doc("the runtime's order where kinds meet on a link: sends, then the sparse exchange, then "
                            "the all-reduce; false: every transfer shares links evenly"));
  return r.Add<Scheduler>("trirace",
                          "TriRace: PipeDream-2BW with dense, sparse and pipeline communication each placed by its "
                          "data dependencies and ordered per link by a topology-aware runtime",
                          params, [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
                            TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
                            TESTBED_ASSIGN_OR_RETURN(const bool sparse, p.Get<bool>("sparse_embedding"));
                            TESTBED_ASSIGN_OR_RETURN(const bool ranked, p.Get<bool>("link_priority"));
                            if (sparse) {
                              o.embedding_exchange = EmbeddingExchange::kAllToAll;
                              o.embedding_prefetch = true;
                            }
                            if (ranked) {
                              o.stream_priority[streams::kPipelineComm] = 3;
                              o.stream_priority[streams::kSparseComm] = 2;
                              o.stream_priority[streams::kDataComm] = 1;
                            }
                            return std::make_unique<TriRace>(o);
                          });
}

}  // namespace
}  // namespace testbed::trirace

TESTBED_PLUGIN("trirace", "1.0.0", "TriRace 3D communication scheduling on PipeDream-2BW", testbed::trirace::Register)
