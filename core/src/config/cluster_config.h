// Reads devices (configs/devices), node types and clusters (configs/clusters) into the
// core's DeviceSpec / NodeType / Cluster, validating every key.
//
// A cluster description: `preset` (a file in configs/clusters whose [cluster] table is the
// base), `node` (a node-type preset name or an inline [node] table) and `nodes` (how many),
// or `groups = [{ node = ..., nodes = ... }, ...]` for heterogeneous clusters. A preset file
// that defines a [node] is also a 1-node cluster of that node type, so
// `[cluster] preset = "dgx-a100"  nodes = 16` composes 16 DGX nodes.
#pragma once

#include <memory>

#include "config/config_doc.h"
#include "config/preset_library.h"
#include "config/schema.h"
#include "testbed/cluster.h"

namespace testbed {

[[nodiscard]] const std::vector<ParamSpec>& DeviceSchema();
[[nodiscard]] const std::vector<ParamSpec>& NodeSchema();
[[nodiscard]] const std::vector<ParamSpec>& LinkTypeSchema();
[[nodiscard]] const std::vector<ParamSpec>& ClusterSchema();

// Reads the device table at `section` of `doc` (a preset name string there is loaded from
// configs/devices). Problems are added to `errors`.
[[nodiscard]] DeviceSpec ResolveDevice(const ConfigDoc& doc, const KeyPath& section, const PresetLibrary& presets,
                                       ErrorList& errors);

[[nodiscard]] std::shared_ptr<const Cluster> ResolveCluster(const ConfigDoc& doc, const KeyPath& section,
                                                            const PresetLibrary& presets, ErrorList& errors);

}  // namespace testbed
