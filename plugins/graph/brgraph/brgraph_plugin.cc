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
  // budget_mib < 0: one-level reuse.
  BatchReuseLoader(GraphSource source, double budget_mib) : FeatureLoader(std::move(source)), budget_mib_(budget_mib) {}

  absl::StatusOr<FeatureLoad> Begin(const FeatureGraph& graph) override {
    const std::int64_t extra =
        budget_mib_ < 0 ? 0 : static_cast<std::int64_t>(budget_mib_ * 1048576.0 / static_cast<double>(graph.row_bytes));
    state_.emplace(graph, extra);
    return FeatureLoad{};
  }

  absl::StatusOr<FeatureLoad> Next(std::span<const std::int64_t> batch) override {
    if (!state_) return absl::FailedPreconditionError("brgraph: Next before Begin");
    return state_->Next(batch);
  }

 private:
  double budget_mib_;
  std::optional<BatchReuse> state_;
};

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<FeatureLoader>(
      "brgraph", "BRGraph: the previous batch's features reused on the device; only new vertices copied",
      FeatureLoaderParams(), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<FeatureLoader>> {
        TESTBED_ASSIGN_OR_RETURN(GraphSource source, GraphSourceFrom(p, "brgraph"));
        return std::make_unique<BatchReuseLoader>(std::move(source), -1.0);
      }));
  std::vector<ParamSpec> params = FeatureLoaderParams();
  params.push_back(ParamSpec::Double("budget_mib", 1024).Range(0, 1 << 24).Unit("MiB")
                       .Doc("device memory for features kept beyond the batch (the highest-degree ones)"));
  return r.Add<FeatureLoader>(
      "brgraph.two_level", "BRGraph two-level reuse: also keeps non-duplicate features likely needed later",
      std::move(params), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<FeatureLoader>> {
        TESTBED_ASSIGN_OR_RETURN(GraphSource source, GraphSourceFrom(p, "brgraph.two_level"));
        ParamReader read(p, "brgraph.two_level");
        const double budget = read.Get<double>("budget_mib");
        TESTBED_RETURN_IF_ERROR(read.status());
        return std::make_unique<BatchReuseLoader>(std::move(source), budget);
      });
}

}  // namespace
}  // namespace testbed::brgraph

TESTBED_PLUGIN("graph_brgraph", "1.0.0", "BRGraph: batch reuse of GNN mini-batch features on the device",
               testbed::brgraph::Register)
