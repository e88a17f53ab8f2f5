// Components are the units plugins provide: a named implementation of one of the stable
// interfaces (kinds) below, created from its validated parameters.
#pragma once

#include "absl/strings/string_view.h"
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "testbed/param_spec.h"

namespace testbed {

// The stable interfaces. Each kind's C++ interface lives in its own header
// (testbed/<kind>.h) and names its kind in `static constexpr ComponentKind kKind`.
enum class ComponentKind {
  kPartitioner,      // model graph, cluster -> pipeline stages, device mapping, degrees
  kTpPlanner,        // model graph, cluster -> per-op tensor-parallel degree
  kScheduler,        // plan -> schedule (task graph)
  kCollective,       // collective op, group, bytes -> algorithm and cost (simulator)
  kCommunicator,     // real collectives and point-to-point between ranks
  kCompressor,       // gradient tensor -> payload and back
  kLoadBalancer,     // per-expert token counts -> expert placement / replication
  kFeatureLoader,    // GNN mini-batch sequence -> host-to-device transfers
  kPrecisionPolicy,  // model graph -> bit width per layer
  kShardPlanner,     // sharded data parallelism: each layer's weights split over link classes
  kDeviceModel,      // op description -> time and memory
};

inline constexpr ComponentKind kAllComponentKinds[] = {
    ComponentKind::kPartitioner,   ComponentKind::kTpPlanner,     ComponentKind::kScheduler,
    ComponentKind::kCollective,    ComponentKind::kCommunicator,  ComponentKind::kCompressor,
    ComponentKind::kLoadBalancer,  ComponentKind::kFeatureLoader, ComponentKind::kPrecisionPolicy,
    ComponentKind::kShardPlanner,  ComponentKind::kDeviceModel,
};

// The kind's name as written in experiment files ("partitioner", "device_model", ...).
[[nodiscard]] const char* KindName(ComponentKind kind) noexcept;
[[nodiscard]] std::optional<ComponentKind> KindFromName(absl::string_view name) noexcept;

// Base of every component interface. Components are used from one thread at a time, but
// different instances of one component may run concurrently (experiments run with -j N).
class Component {
 public:
  virtual ~Component() = default;
};

// What a plugin declares about one component.
struct ComponentDecl {
  ComponentKind kind = ComponentKind::kPartitioner;
  std::string name;  // globally unique, by convention "<plugin>" or "<plugin>.<variant>"
  std::string doc;   // one line
  std::vector<ParamSpec> params;
};

}  // namespace testbed
