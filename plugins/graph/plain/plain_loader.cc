// Feature loader "none": every mini-batch copies all of its vertices' features host to
// device, and nothing stays on the device between batches (plain DGL / PyG data loading).
#include "testbed/feature_loader.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::plain_loader {
namespace {

class PlainLoader final : public FeatureLoader {
 public:
  using FeatureLoader::FeatureLoader;

  absl::StatusOr<FeatureLoad> Begin(const FeatureGraph& /*graph*/) override { return FeatureLoad{}; }

  absl::StatusOr<FeatureLoad> Next(std::span<const std::int64_t> batch) override {
    FeatureLoad load;
    load.copied.assign(batch.begin(), batch.end());
    return load;
  }
};

absl::Status Register(Registry& r) {
  return r.Add<FeatureLoader>("none", "plain loading: each batch copies all its vertices' features, none kept",
                              FeatureLoaderParams(),
                              [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<FeatureLoader>> {
                                TESTBED_ASSIGN_OR_RETURN(GraphSource source, GraphSourceFrom(p, "none"));
                                return std::make_unique<PlainLoader>(std::move(source));
                              });
}

}  // namespace
}  // namespace testbed::plain_loader

TESTBED_PLUGIN("graph_plain", "1.0.0", "plain GNN feature loading (the baseline of the feature loaders)",
               testbed::plain_loader::Register)
