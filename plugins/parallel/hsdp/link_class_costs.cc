#include "link_class_costs.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::hsdp {
namespace {

absl::StatusOr<OpCost> Cost(CollectiveOp op, const std::vector<DeviceId>& group, const Cluster& view,
                            const Collective& collective, double bytes) {
  TESTBED_ASSIGN_OR_RETURN(CommPlan plan,
                           collective.PlanCollective(op, group, static_cast<std::int64_t>(bytes), view));
  OpCost cost;
  std::map<LinkId, double> per_link;
  for (const CommPhase& phase : plan.phases) {
    cost.latency_s += phase.latency_s;
    for (const auto& [link, b] : phase.link_bytes) {
      per_link[link] += b / view.links()[static_cast<size_t>(link)].spec.bandwidth_bytes_per_s / bytes;
    }
  }
  cost.s_per_byte.assign(per_link.begin(), per_link.end());
  return cost;
}

}  // namespace

absl::StatusOr<std::vector<ClassCost>> LinkClassCosts(const std::vector<DeviceId>& group,
                                                      const std::vector<LinkKinds>& classes, const Cluster& cluster,
                                                      const Collective& collective, double reference_bytes) {
  std::vector<ClassCost> out;
  for (size_t i = 0; i < classes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (classes[i] == classes[j]) {
        return absl::InvalidArgumentError(absl::StrCat("link class '", LinkKindsName(classes[i]), "' is named twice"));
      }
    }
    const Cluster view = cluster.Over(classes[i]);
    ClassCost c;
    c.kinds = classes[i];
    c.name = LinkKindsName(classes[i]);
    if (absl::Status st = view.CheckRoutes(group); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("link class '", c.name, "': ", st.message()));
    }
    TESTBED_ASSIGN_OR_RETURN(c.gather, Cost(CollectiveOp::kAllGather, group, view, collective, reference_bytes));
    TESTBED_ASSIGN_OR_RETURN(c.scatter, Cost(CollectiveOp::kReduceScatter, group, view, collective, reference_bytes));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace testbed::hsdp
