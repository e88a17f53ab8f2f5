#include "absl/strings/string_view.h"
#include "testbed/component.h"

namespace testbed {

const char* KindName(ComponentKind kind) noexcept {
  switch (kind) {
    case ComponentKind::kPartitioner: return "partitioner";
    case ComponentKind::kTpPlanner: return "tp_planner";
    case ComponentKind::kScheduler: return "scheduler";
    case ComponentKind::kCollective: return "collective";
    case ComponentKind::kCommunicator: return "communicator";
    case ComponentKind::kCompressor: return "compressor";
    case ComponentKind::kLoadBalancer: return "load_balancer";
    case ComponentKind::kFeatureLoader: return "feature_loader";
    case ComponentKind::kPrecisionPolicy: return "precision_policy";
    case ComponentKind::kShardPlanner: return "shard_planner";
    case ComponentKind::kDeviceModel: return "device_model";
  }
  return "?";
}

std::optional<ComponentKind> KindFromName(absl::string_view name) noexcept {
  for (ComponentKind kind : kAllComponentKinds) {
    if (KindName(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace testbed
