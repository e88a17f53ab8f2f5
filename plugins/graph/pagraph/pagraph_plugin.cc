// Feature loader "pagraph.static_cache" (static_cache.h).
#include <chrono>

#include "absl/strings/str_cat.h"
#include "static_cache.h"
#include "testbed/feature_loader.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::pagraph {
namespace {

class StaticCacheLoader final : public FeatureLoader {
 public:
  StaticCacheLoader(GraphSource source, FeatureBudget budget) : FeatureLoader(std::move(source)), budget_(budget) {}

  absl::StatusOr<FeatureLoad> Begin(const FeatureGraph& graph) override {
    const std::int64_t rows = budget_.Rows(graph);
    cached_.assign(static_cast<size_t>(graph.vertices), 0);
    FeatureLoad load;
    load.copied = CachedVertices(graph.degrees, rows);
    for (std::int64_t v : load.copied) cached_[static_cast<size_t>(v)] = 1;
    load.kept = load.copied;
    kept_ = load.kept;
    return load;
  }

  absl::StatusOr<FeatureLoad> Next(std::span<const std::int64_t> batch) override {
    const auto t0 = std::chrono::steady_clock::now();
    FeatureLoad load;
    for (std::int64_t v : batch) {
      if (v < 0 || static_cast<size_t>(v) >= cached_.size()) {
        return absl::InvalidArgumentError(absl::StrCat("pagraph.static_cache: vertex ", v, " outside the graph"));
      }
      if (cached_[static_cast<size_t>(v)] == 0) load.copied.push_back(v);
    }
    load.detect_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    load.kept = kept_;
    return load;
  }

 private:
  FeatureBudget budget_;
  std::vector<std::uint8_t> cached_;
  std::vector<std::int64_t> kept_;
};

absl::Status Register(Registry& r) {
  std::vector<ParamSpec> params = FeatureLoaderParams();
  for (ParamSpec& b : FeatureBudgetParams("the cache: the highest-degree vertices' features that fit")) {
    params.push_back(std::move(b));
  }
  return r.Add<FeatureLoader>(
      "pagraph.static_cache", "PaGraph: the highest-degree vertices' features cached on the device; misses copied",
      std::move(params), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<FeatureLoader>> {
        TESTBED_ASSIGN_OR_RETURN(GraphSource source, GraphSourceFrom(p, "pagraph.static_cache"));
        TESTBED_ASSIGN_OR_RETURN(FeatureBudget budget, FeatureBudgetFrom(p, "pagraph.static_cache"));
        return std::make_unique<StaticCacheLoader>(std::move(source), budget);
      });
}

}  // namespace
}  // namespace testbed::pagraph

TESTBED_PLUGIN("graph_pagraph", "1.0.0", "PaGraph's static cache of hot vertices' features",
               testbed::pagraph::Register)
