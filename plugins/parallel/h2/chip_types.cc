#include "chip_types.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed::h2 {

std::vector<ChipType> ChipTypes(const Cluster& cluster) {
  std::vector<ChipType> types;
  auto type_of = [&](const DeviceSpec& spec) -> ChipType& {
    for (ChipType& t : types) {
      if (t.name == spec.name) return t;
    }
    types.push_back(ChipType{spec.name, spec, {}, 1 << 30});
    return types.back();
  };
  for (const NodeGroup& g : cluster.groups()) {
    ChipType& t = type_of(g.type.device);
    t.per_node = std::min(t.per_node, g.type.devices);
  }
  for (const Device& d : cluster.devices()) type_of(cluster.spec_of(d.id)).devices.push_back(d.id);
  return types;
}

absl::StatusOr<int> FindChipType(const std::vector<ChipType>& types, const std::string& name,
                                 const std::string& cluster_name) {
  std::vector<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].name == name) return static_cast<int>(i);
    names.push_back(types[i].name);
  }
  return absl::InvalidArgumentError(absl::StrCat("chip type '", name, "' is not in cluster '", cluster_name,
                                                 "' (its chip types: ", absl::StrJoin(names, ", "), ")"));
}

}  // namespace testbed::h2
