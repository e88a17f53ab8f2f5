#include "link_class_costs.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::hsdp {
namespace {

// The ring of the planner's own model (all-gather and reduce-scatter move the same bytes).
CommPlan RingPlan(const std::vector<DeviceId>& group, const Cluster& view, double bytes) {
  CommPlan plan;
  const int n = static_cast<int>(group.size());
  if (n < 2) return plan;
  CommPhase phase;
  std::map<LinkId, double> per_link;
  double slowest = 0;
  for (int i = 0; i < n; ++i) {
    const DeviceId a = group[static_cast<size_t>(i)], b = group[static_cast<size_t>((i + 1) % n)];
    for (LinkId l : view.Route(a, b)) per_link[l] += bytes / n * (n - 1);
    slowest = std::max(slowest, view.PathLatency(a, b));
  }
  phase.latency_s = (n - 1) * slowest;
  phase.link_bytes.assign(per_link.begin(), per_link.end());
  plan.phases.push_back(std::move(phase));
  return plan;
}

absl::StatusOr<OpCost> Cost(CollectiveOp op, const std::vector<DeviceId>& group, const Cluster& view,
                            const Collective* collective, double bytes) {
  CommPlan plan;
  if (collective == nullptr) {
    plan = RingPlan(group, view, bytes);
  } else {
    TESTBED_ASSIGN_OR_RETURN(plan, collective->PlanCollective(op, group, static_cast<std::int64_t>(bytes), view));
  }
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
                                                      const Collective* collective, double reference_bytes) {
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

absl::Status CheckIndependent(const std::vector<ClassCost>& classes, const Cluster& cluster) {
  for (size_t i = 0; i < classes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      for (const auto& [a, sa] : classes[i].gather.s_per_byte) {
        for (const auto& [b, sb] : classes[j].gather.s_per_byte) {
          if (a != b) continue;
          return absl::InvalidArgumentError(absl::StrCat(
              "link classes '", classes[j].name, "' and '", classes[i].name, "' both cross link ",
              cluster.links()[static_cast<size_t>(a)].name,
              " for this data-parallel group; HSDP splits the weights over independent links (choose classes whose "
              "routes do not meet, e.g. nvlink and pcie+cpu inside a node, or set shared_links = \"add\" to let "
              "the cost model add their loads on the links they share)"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed::hsdp
