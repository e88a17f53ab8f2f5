// FeatureBudget (testbed/feature_loader.h): the device budget of loaders that keep rows
// beyond the batch, declared and read in one place.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "testbed/feature_loader.h"
#include "testbed/status_macros.h"

namespace testbed {

std::int64_t FeatureBudget::Rows(const FeatureGraph& graph) const noexcept {
  double rows = 0;
  if (fraction > 0) {
    rows = std::floor(fraction * static_cast<double>(graph.vertices));
  } else if (graph.row_bytes > 0) {
    rows = std::floor(mib * 1048576.0 / static_cast<double>(graph.row_bytes));
  }
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::min(rows, 9.0e18)), 0, graph.vertices);
}

std::vector<ParamSpec> FeatureBudgetParams(const std::string& what) {
  return {
      ParamSpec::Double("budget_mib", 1024).Range(0, 1 << 24).Unit("MiB")
          .Doc(absl::StrCat("device memory for ", what, " (used when budget_fraction is 0)")),
      ParamSpec::Double("budget_fraction", 0).Range(0, 1).Unit("1")
          .Doc(absl::StrCat("> 0: ", what, " up to this share of all the graph's feature rows, instead of budget_mib")),
  };
}

absl::StatusOr<FeatureBudget> FeatureBudgetFrom(const ParamSet& params, const std::string& owner) {
  ParamReader read(params, owner);
  FeatureBudget b;
  b.mib = read.Get<double>("budget_mib");
  b.fraction = read.Get<double>("budget_fraction");
  TESTBED_RETURN_IF_ERROR(read.status());
  return b;
}

}  // namespace testbed
