// The chip types of a heterogeneous cluster, as H2 sees them: each device preset of the
// cluster (several node groups of one preset are one type), its devices in cluster order and
// how many share a node (the largest tensor-parallel group that stays inside a node).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/cluster.h"

namespace testbed::h2 {

struct ChipType {
  std::string name;  // the device preset's name (DeviceSpec::name)
  DeviceSpec spec;
  std::vector<DeviceId> devices;  // cluster order
  int per_node = 1;               // devices per node (the smallest over its node groups)
};

// In the order the cluster's groups first name them.
[[nodiscard]] std::vector<ChipType> ChipTypes(const Cluster& cluster);

// Index of the type named `name`; InvalidArgument naming the types the cluster has.
[[nodiscard]] absl::StatusOr<int> FindChipType(const std::vector<ChipType>& types, const std::string& name,
                                               const std::string& cluster_name);

}  // namespace testbed::h2
