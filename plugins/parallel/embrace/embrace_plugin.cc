// Plugin "embrace": EmbRace (Li et al., ICPP 2022, "EmbRace: Accelerating Sparse Communication
// for Distributed Training of Deep Neural Networks") as a scheduler. Sparsity-aware hybrid
// communication: the embedding table's rows are owned by the data-parallel replicas in turn
// and exchanged by all-to-all-v (a batch's rows fetched from their owners, their gradients
// sent back), the dense layers' gradients all-reduced. 2D communication scheduling: the
// backward computes every input gradient first so the embedding's row gradients leave
// before the weights' gradients are computed (and those of the dense layers then follow),
// and the next iteration's rows that the update does not touch are fetched early, so only
// the updated rows wait for it. The mechanics are the core's (ExpandOptions::
// embedding_exchange, embedding_prefetch, split_backward); this plugin chooses them.
#include "testbed/pipeline_program.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::embrace {
namespace {

class EmbRace final : public Scheduler {
 public:
  explicit EmbRace(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    return ExpandOneFOneB(ctx, o_, "embrace");
  }

 private:
  ExpandOptions o_;
};

absl::Status Register(Registry& r) {
  std::vector<ParamSpec> params = ExpandOptionParams();
  params.push_back(ParamSpec::Choice("scheduling", "2d", {"2d", "none"})
                       .Doc("2d: EmbRace's 2D communication scheduling (input gradients first, the next rows the "
                            "update leaves alone fetched early); none: the hybrid all-to-all communication alone"));
  params.push_back(ParamSpec::Int("priority_parts", 4).Range(1, 64)
                       .Doc("2d: the rows an update changed fetched in this many parts by the time step that first "
                            "needs them, the first forward of an LSTM model in as many parts of its steps, each "
                            "waiting only for its rows (1: all rows before the forward)"));
  return r.Add<Scheduler>("embrace",
                          "EmbRace: embedding rows owned by the replicas and exchanged by all-to-all-v, dense "
                          "gradients all-reduced, 2D communication scheduling (1F1B program)",
                          params, [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
                            TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
                            TESTBED_ASSIGN_OR_RETURN(const std::string scheduling, p.Get<std::string>("scheduling"));
                            o.embedding_exchange = EmbeddingExchange::kAllToAll;
                            o.embedding_prefetch = scheduling == "2d";
                            o.split_backward = scheduling == "2d";
                            TESTBED_ASSIGN_OR_RETURN(const std::int64_t parts, p.Get<std::int64_t>("priority_parts"));
                            o.embedding_priority_parts = scheduling == "2d" ? static_cast<int>(parts) : 1;
                            return std::make_unique<EmbRace>(o);
                          });
}

}  // namespace
}  // namespace testbed::embrace

TESTBED_PLUGIN("embrace", "1.0.0", "EmbRace sparse embedding communication", testbed::embrace::Register)
