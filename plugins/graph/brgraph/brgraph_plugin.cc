// Feature loaders "brgraph" (batch reuse) and "brgraph.two_level" (batch_reuse.h).
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "batch_reuse.h"
#include "testbed/feature_loader.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::brgraph {
namespace {

class BatchReuseLoader final : public FeatureLoader {
 public:
  // No budget: one-level reuse.
  BatchReuseLoader(GraphSource source, std::optional<FeatureBudget> budget)
      : FeatureLoader(std::move(source)), budget_(budget) {}

  absl::StatusOr<FeatureLoad> Begin(const FeatureGraph& graph) override {
    const std::int64_t extra = budget_ ? budget_->Rows(graph) : 0;
    state_.emplace(graph, extra);
    return FeatureLoad{};
  }

  absl::StatusOr<FeatureLoad> Next(std::span<const std::int64_t> batch) override {
    if (!state_) return absl::FailedPreconditionError("brgraph: Next before Begin");
    return state_->Next(batch);
  }

 private:
  std::optional<FeatureBudget> budget_;
  std::optional<BatchReuse> state_;
};

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<FeatureLoader>(
      "brgraph", "BRGraph: the previous batch's features reused on the device; only new vertices copied",
      FeatureLoaderParams(), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<FeatureLoader>> {
        TESTBED_ASSIGN_OR_RETURN(GraphSource source, GraphSourceFrom(p, "brgraph"));
        return std::make_unique<BatchReuseLoader>(std::move(source), std::nullopt);
      }));
  std::vector<ParamSpec> params = FeatureLoaderParams();
  for (ParamSpec& b : FeatureBudgetParams("features kept beyond the batch (the highest-degree ones)")) {
    params.push_back(std::move(b));
  }
  return r.Add<FeatureLoader>(
      "brgraph.two_level", "BRGraph two-level reuse: also keeps non-duplicate features likely needed later",
      std::move(params), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<FeatureLoader>> {
        TESTBED_ASSIGN_OR_RETURN(GraphSource source, GraphSourceFrom(p, "brgraph.two_level"));
        TESTBED_ASSIGN_OR_RETURN(FeatureBudget budget, FeatureBudgetFrom(p, "brgraph.two_level"));
        return std::make_unique<BatchReuseLoader>(std::move(source), budget);
      });
}

}  // namespace
}  // namespace testbed::brgraph

TESTBED_PLUGIN("graph_brgraph", "1.0.0", "BRGraph: batch reuse of GNN mini-batch features on the device",
               testbed::brgraph::Register)
