#include "config/cluster_config.h"

#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/model_config.h"

namespace testbed {

const std::vector<ParamSpec>& DeviceSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Doc("device name"),
      ParamSpec::String("vendor", "").Doc("maker"),
      ParamSpec::String("doc", "").Doc("one line, with the source of the figures"),
      ParamSpec::Double("memory_gib", 0).Min(0.001).Required().Unit("GiB").Doc("device memory"),
      ParamSpec::Double("memory_bandwidth_gb_per_s", 0).Min(0.001).Required().Unit("GB/s").Doc("memory bandwidth"),
  };
  return schema;
}

const std::vector<ParamSpec>& LinkTypeSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::Choice("kind", "other", {"nvlink", "pcie", "cpu", "infiniband", "ethernet", "other"})
          .Doc("technology, for reports"),
      ParamSpec::Double("bandwidth_gb_per_s", 0).Min(1e-6).Required().Unit("GB/s").Doc("bandwidth per direction"),
      ParamSpec::Double("latency_us", 0).Min(0).Unit("us").Doc("one-way latency"),
      ParamSpec::String("doc", "").Doc("one line, with the source"),
  };
  return schema;
}

const std::vector<ParamSpec>& NodeSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Doc("node type name"),
      ParamSpec::String("doc", "").Doc("one line"),
      ParamSpec::Int("devices", 1).Range(1, 1 << 20).Unit("devices").Doc("accelerators per node, named gpu0, gpu1, ..."),
      ParamSpec::StringList("hubs", {}).Doc("other endpoints inside the node: CPU sockets, PCIe switches, NVSwitch"),
      ParamSpec::StringList("hosts", {}).Doc("hubs that are host memory, the ends of host-device copies (default: hubs named cpu*)"),
      ParamSpec::StringList("nics", {}).Doc("network interfaces to the inter-node fabric"),
      ParamSpec::StringList("nic_of", {}).Doc("NIC used by each device (default: the nearest); an entry may list several joined by '+', rail 0 first ('nic0+nic1': link class nic1 routes over the second)"),
      ParamSpec::StringList("device_links", {})
          .Doc("[endpoint, link type]: a link of that type from every device to that endpoint (a switch), besides `links`"),
      ParamSpec::String("nic_link", "").Doc("link type of each NIC's port to the fabric"),
  };
  return schema;
}

const std::vector<ParamSpec>& ClusterSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Doc("cluster name"),
      ParamSpec::String("doc", "").Doc("one line"),
      ParamSpec::Int("nodes", 1).Range(1, 1 << 24).Unit("nodes").Doc("how many nodes of `node`"),
      ParamSpec::Choice("routes", "lazy", {"lazy", "all_pairs"})
          .Doc("lazy: routes inside a node found per source on first use; all_pairs: every pair when built (reference)"),
      ParamSpec::Double("memory_limit_gib", 0).Min(0).Unit("GiB")
          .Doc("refuse a cluster whose description would exceed this (0: half the free memory)"),
      ParamSpec::Choice("cross_vendor", "device_direct", {"device_direct", "host_staged"})
          .Doc("transfers between devices of different vendors: device_direct (RDMA, H2's DiComm) or host_staged "
               "(device to host over PCIe, a host copy, the network, host to device)"),
      ParamSpec::Double("host_copy_gb_per_s", 10.0).Min(0.001).Unit("GB/s")
          .Doc("host memory copy bandwidth of a host-staged cross-vendor transfer (one copy per message)"),
  };
  return schema;
}

const std::vector<ParamSpec>& NetworkSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::Bool("rails", false).Doc("rail-optimised: NIC k of every node of a leaf group goes to a leaf of rail k"),
  };
  return schema;
}

const std::vector<ParamSpec>& NetworkTierSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Doc("tier name, for link names and reports (default: tier0, tier1, ...)"),
      ParamSpec::Int("fan_in", 0).Range(0, 1 << 24).Unit("units")
          .Doc("nodes under one switch of the first tier, switches of the tier below under one of this tier "
               "(required but for the top tier, which joins everything)"),
      ParamSpec::Double("uplink_gb_per_s", 0).Min(0).Unit("GB/s")
          .Doc("one switch's bandwidth to the next tier, per direction (required for all but the top tier)"),
      ParamSpec::Double("uplink_latency_us", 0).Min(0).Unit("us").Doc("latency of that uplink, one way"),
      ParamSpec::Choice("kind", "infiniband", {"nvlink", "pcie", "cpu", "infiniband", "ethernet", "other"})
          .Doc("technology of the uplinks, for reports"),
      ParamSpec::String("doc", "").Doc("one line, with the source"),
  };
  return schema;
}

namespace {

KeyPath Child(const KeyPath& p, std::string key) {
  KeyPath out = p;
  out.push_back(std::move(key));
  return out;
}

// `value` at `path` is either a preset name (loaded from `category`, table `table`) or an
// inline table. Returns a document whose root is the table.
absl::StatusOr<ConfigDoc> PresetOrInline(const ConfigDoc& doc, const KeyPath& path, const PresetLibrary& presets,
                                         const std::string& category, const std::string& table) {
  const toml::node* n = doc.Get(path);
  if (n == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(doc.Where(path).ToString(), ": missing '", PathToString(path), "'"));
  }
  if (auto name = n->value_exact<std::string>()) {
    auto preset = presets.Load(category, *name);
    if (!preset.ok()) {
      return absl::Status(preset.status().code(),
                          absl::StrCat(doc.Where(path).ToString(), ": ", preset.status().message()));
    }
    if (preset->GetTable({table}) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(doc.Where(path).ToString(), ": preset '", *name, "' (",
                                                     preset->file(), ") has no [", table, "] table"));
    }
    return ConfigDoc::Subtree(*preset, {table});
  }
  // A table: inline, or a preset's table with keys overridden (`{ preset = "hpwnv-eth",
  // nic_link = "gbe" }`).
  if (n->is_table()) return MergeWithPreset(doc, path, presets, category, table);
  return absl::InvalidArgumentError(absl::StrCat(doc.Where(path).ToString(), ": '", PathToString(path),
                                                 "': expected a preset name or a table"));
}

LinkKind KindOf(const std::string& s) {
  if (s == "nvlink") return LinkKind::kNvlink;
  if (s == "pcie") return LinkKind::kPcie;
  if (s == "cpu") return LinkKind::kCpuInterconnect;
  if (s == "infiniband") return LinkKind::kInfiniband;
  if (s == "ethernet") return LinkKind::kEthernet;
  return LinkKind::kOther;
}

std::optional<NodeType> ResolveNode(const ConfigDoc& node_doc, const PresetLibrary& presets, ErrorList& errors) {
  const size_t before = errors.size();
  ParamSet p = ResolveParams(node_doc, {}, NodeSchema(), "[node]", {"device", "link_types", "links"}, errors);
  NodeType type;
  type.name = Declared<std::string>(p, "name", errors);
  type.doc = Declared<std::string>(p, "doc", errors);
  type.devices = static_cast<int>(Declared<std::int64_t>(p, "devices", errors));
  type.hubs = Declared<std::vector<std::string>>(p, "hubs", errors);
  type.hosts = Declared<std::vector<std::string>>(p, "hosts", errors);
  type.nics = Declared<std::vector<std::string>>(p, "nics", errors);
  type.nic_of = Declared<std::vector<std::string>>(p, "nic_of", errors);
  type.device = ResolveDevice(node_doc, {"device"}, presets, errors);

  std::map<std::string, LinkSpec> link_types;
  if (const toml::table* lt = node_doc.GetTable({"link_types"})) {
    for (auto&& [k, v] : *lt) {
      const std::string name(k.str());
      ParamSet lp = ResolveParams(node_doc, {"link_types", name}, LinkTypeSchema(),
                                  absl::StrCat("[node.link_types.", name, "]"), {}, errors);
      LinkSpec spec;
      spec.type = name;
      spec.kind = KindOf(Declared<std::string>(lp, "kind", errors));
      spec.bandwidth_bytes_per_s = Declared<double>(lp, "bandwidth_gb_per_s", errors) * 1e9;
      spec.latency_s = Declared<double>(lp, "latency_us", errors) * 1e-6;
      link_types[name] = spec;
    }
  } else if (node_doc.Get({"link_types"}) != nullptr) {
    errors.Add(node_doc.Where({"link_types"}), "[node]: 'link_types' must be a table of link types");
  }
  auto link_type = [&](const std::string& name, const KeyPath& where) -> std::optional<LinkSpec> {
    auto it = link_types.find(name);
    if (it == link_types.end()) {
      std::vector<std::string> names;
      for (const auto& [n, s] : link_types) names.push_back(n);
      errors.Add(node_doc.Where(where), absl::StrCat("[node]: unknown link type '", name, "'; declared: ",
                                                     names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
      return std::nullopt;
    }
    return it->second;
  };
  if (const toml::node* links = node_doc.Get({"links"})) {
    const toml::array* arr = links->as_array();
    if (arr == nullptr) {
      errors.Add(node_doc.Where({"links"}), "[node]: 'links' must be an array of [endpoint, endpoint, link type]");
    } else {
      for (size_t i = 0; i < arr->size(); ++i) {
        KeyPath where = {"links", absl::StrCat("[", i, "]")};
        const toml::array* triple = arr->get(i)->as_array();
        auto a = triple && triple->size() == 3 ? triple->get(0)->value_exact<std::string>() : std::nullopt;
        auto b = triple && triple->size() == 3 ? triple->get(1)->value_exact<std::string>() : std::nullopt;
        auto t = triple && triple->size() == 3 ? triple->get(2)->value_exact<std::string>() : std::nullopt;
        if (!a || !b || !t) {
          errors.Add(node_doc.Where(where), "[node]: each link must be [\"endpoint\", \"endpoint\", \"link type\"]");
          continue;
        }
        if (auto spec = link_type(*t, where)) type.links.push_back(NodeType::LocalLink{*a, *b, *spec});
      }
    }
  }
  const std::vector<std::string> device_links = Declared<std::vector<std::string>>(p, "device_links", errors);
  if (!device_links.empty()) {
    if (device_links.size() != 2) {
      errors.Add(node_doc.Where({"device_links"}), "[node]: 'device_links' must be [\"endpoint\", \"link type\"]");
    } else if (auto spec = link_type(device_links[1], {"device_links"})) {
      for (int i = 0; i < type.devices; ++i) {
        type.links.push_back(NodeType::LocalLink{absl::StrCat("gpu", i), device_links[0], *spec});
      }
    }
  }
  const std::string nic_link = Declared<std::string>(p, "nic_link", errors);
  if (!nic_link.empty()) {
    if (auto spec = link_type(nic_link, {"nic_link"})) type.nic_link = *spec;
  } else if (!type.nics.empty()) {
    errors.Add(node_doc.Where({}), "[node]: has nics but no 'nic_link' (the link type of the NIC ports)");
  }
  if (errors.size() != before) return std::nullopt;
  return type;
}

// [cluster.network]: rails and an array of tiers, bottom first.
Network ResolveNetwork(const ConfigDoc& doc, const std::string& owner, ErrorList& errors) {
  Network net;
  if (doc.Get({"network"}) == nullptr) return net;
  if (doc.GetTable({"network"}) == nullptr) {
    errors.Add(doc.Where({"network"}), absl::StrCat(owner, ": 'network' must be a table { rails, tiers = [...] }"));
    return net;
  }
  ParamSet p = ResolveParams(doc, {"network"}, NetworkSchema(), absl::StrCat(owner, ".network"), {"tiers"}, errors);
  net.rails = Declared<bool>(p, "rails", errors);
  const toml::node* tiers = doc.Get({"network", "tiers"});
  const toml::array* arr = tiers ? tiers->as_array() : nullptr;
  if (tiers == nullptr || arr == nullptr || arr->empty()) {
    errors.Add(doc.Where({"network"}), absl::StrCat(owner, ".network: 'tiers' must be a non-empty array of tables "
                                                           "{ name, fan_in, uplink_gb_per_s }, the leaf tier first"));
    return net;
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    KeyPath tp = {"network", "tiers", absl::StrCat("[", i, "]")};
    const toml::table* t = arr->get(i)->as_table();
    if (t == nullptr) {
      errors.Add(doc.Where(tp), absl::StrCat(owner, ".network: tier ", i, " must be a table { name, fan_in, ... }"));
      continue;
    }
    ConfigDoc tier_doc;
    (void)tier_doc.Set({"tier"}, *t, doc, tp);
    const std::string tier_owner = absl::StrCat(owner, ".network tier ", i);
    ParamSet tpar = ResolveParams(tier_doc, {"tier"}, NetworkTierSchema(), tier_owner, {}, errors);
    NetworkTier tier;
    tier.name = Declared<std::string>(tpar, "name", errors);
    if (tier.name.empty()) tier.name = absl::StrCat("tier", i);
    tier.fan_in = static_cast<int>(Declared<std::int64_t>(tpar, "fan_in", errors));
    tier.uplink.type = absl::StrCat(tier.name, "_uplink");
    tier.uplink.kind = KindOf(Declared<std::string>(tpar, "kind", errors));
    tier.uplink.bandwidth_bytes_per_s = Declared<double>(tpar, "uplink_gb_per_s", errors) * 1e9;
    tier.uplink.latency_s = Declared<double>(tpar, "uplink_latency_us", errors) * 1e-6;
    if (i + 1 < arr->size() && tier.uplink.bandwidth_bytes_per_s <= 0) {
      errors.Add(tier_doc.Where({"tier"}), absl::StrCat(tier_owner, " ('", tier.name,
                                                        "'): missing 'uplink_gb_per_s' (every tier but the top "
                                                        "one has uplinks)"));
    }
    net.tiers.push_back(std::move(tier));
  }
  return net;
}

}  // namespace

DeviceSpec ResolveDevice(const ConfigDoc& doc, const KeyPath& section, const PresetLibrary& presets,
                         ErrorList& errors) {
  DeviceSpec spec;
  auto dev_doc = PresetOrInline(doc, section, presets, "devices", "device");
  if (!dev_doc.ok()) {
    errors.Add(dev_doc.status());
    return spec;
  }
  ParamSet p = ResolveParams(*dev_doc, {}, DeviceSchema(), "[device]", {"peak_tflops"}, errors);
  spec.name = Declared<std::string>(p, "name", errors);
  if (spec.name.empty()) {
    const toml::node* n = doc.Get(section);
    spec.name = n && n->is_string() ? n->as_string()->get() : "device";
  }
  spec.vendor = Declared<std::string>(p, "vendor", errors);
  spec.doc = Declared<std::string>(p, "doc", errors);
  spec.memory_bytes = static_cast<std::int64_t>(Declared<double>(p, "memory_gib", errors) * 1073741824.0);
  spec.memory_bandwidth_bytes_per_s = Declared<double>(p, "memory_bandwidth_gb_per_s", errors) * 1e9;
  const toml::table* peaks = dev_doc->GetTable({"peak_tflops"});
  if (peaks == nullptr) {
    errors.Add(dev_doc->Where({}), "[device]: missing table 'peak_tflops' (peak TFLOP/s per precision)");
    return spec;
  }
  for (auto&& [k, v] : *peaks) {
    auto prec = PrecisionFromName(std::string(k.str()));
    KeyPath where = {"peak_tflops", std::string(k.str())};
    if (!prec) {
      errors.Add(dev_doc->Where(where), absl::StrCat("[device.peak_tflops]: unknown precision '", std::string(k.str()),
                                                     "'; expected one of: fp32, tf32, fp16, bf16, fp8, int8, int4"));
      continue;
    }
    auto tf = ConvertValue(v, ParamSpec::Double(std::string(k.str()), 0).Min(0).Unit("TFLOP/s"));
    if (!tf.ok()) {
      errors.Add(dev_doc->Where(where), absl::StrCat("[device.peak_tflops] '", std::string(k.str()), "': ", tf.status().message()));
      continue;
    }
    spec.peak_flops[*prec] = std::get<double>(*tf) * 1e12;
  }
  if (spec.PeakFlops(Precision::kFp32) <= 0) {
    errors.Add(dev_doc->Where({"peak_tflops"}), "[device.peak_tflops]: fp32 is required");
  }
  return spec;
}

std::shared_ptr<const Cluster> ResolveCluster(const ConfigDoc& doc, const KeyPath& section,
                                              const PresetLibrary& presets, ErrorList& errors) {
  if (doc.GetTable(section) == nullptr) {
    errors.Add(doc.Where(section), absl::StrCat("[", PathToString(section), "]: missing; give a preset or nodes"));
    return nullptr;
  }
  auto merged = MergeWithPreset(doc, section, presets, "clusters", "cluster");
  if (!merged.ok()) {
    errors.Add(merged.status());
    return nullptr;
  }
  // A preset that defines a node type is a cluster of that node type by default.
  if (const toml::node* p = doc.Get(Child(section, "preset")); p && p->is_string() && !merged->Get({"node"}) &&
                                                               !merged->Get({"groups"})) {
    auto preset = presets.Load("clusters", p->as_string()->get());
    if (preset.ok() && preset->Get({"node"})) (void)merged->Set({"node"}, *preset->Get({"node"}), *preset, {"node"});
  }
  const size_t before = errors.size();
  const std::string owner = absl::StrCat("[", PathToString(section), "]");
  ParamSet p = ResolveParams(*merged, {}, ClusterSchema(), owner, {"node", "groups", "network"}, errors);
  ClusterOptions options;
  options.network = ResolveNetwork(*merged, owner, errors);
  options.all_pairs_routes = Declared<std::string>(p, "routes", errors) == "all_pairs";
  options.memory_limit_bytes = Declared<double>(p, "memory_limit_gib", errors) * 1073741824.0;
  options.cross_vendor = Declared<std::string>(p, "cross_vendor", errors) == "host_staged"
                             ? CrossVendorPath::kHostStaged
                             : CrossVendorPath::kDeviceDirect;
  options.host_copy_bytes_per_s = Declared<double>(p, "host_copy_gb_per_s", errors) * 1e9;
  std::string name = Declared<std::string>(p, "name", errors);
  if (name.empty()) {
    const toml::node* pr = doc.Get(Child(section, "preset"));
    name = pr && pr->is_string() ? pr->as_string()->get() : "cluster";
  }
  std::vector<NodeGroup> groups;
  auto add_group = [&](const KeyPath& node_path, int count) {
    auto node_doc = PresetOrInline(*merged, node_path, presets, "clusters", "node");
    if (!node_doc.ok()) {
      errors.Add(node_doc.status());
      return;
    }
    if (auto type = ResolveNode(*node_doc, presets, errors)) groups.push_back(NodeGroup{std::move(*type), count});
  };
  if (const toml::node* g = merged->Get({"groups"})) {
    const toml::array* arr = g->as_array();
    if (arr == nullptr || arr->empty()) {
      errors.Add(merged->Where({"groups"}), absl::StrCat(owner, ": 'groups' must be a non-empty array of tables"));
    } else {
      for (size_t i = 0; i < arr->size(); ++i) {
        KeyPath gp = {"groups", absl::StrCat("[", i, "]")};
        const toml::table* gt = arr->get(i)->as_table();
        if (gt == nullptr) {
          errors.Add(merged->Where(gp), absl::StrCat(owner, ": each group is { node = ..., nodes = N }"));
          continue;
        }
        // Array elements are addressed through a temporary document rooted at the group.
        ConfigDoc group_doc;
        (void)group_doc.Set({"group"}, *gt, *merged, gp);
        ParamSet gpar = ResolveParams(group_doc, {"group"},
                                      {ParamSpec::Int("nodes", 1).Range(1, 1 << 24).Unit("nodes").Doc("node count")},
                                      absl::StrCat(owner, " group ", i), {"node"}, errors);
        if (!group_doc.Get({"group", "node"})) {
          errors.Add(merged->Where(gp), absl::StrCat(owner, " group ", i, ": missing 'node'"));
          continue;
        }
        auto node_doc = PresetOrInline(group_doc, {"group", "node"}, presets, "clusters", "node");
        if (!node_doc.ok()) {
          errors.Add(node_doc.status());
          continue;
        }
        if (auto type = ResolveNode(*node_doc, presets, errors)) {
          groups.push_back(NodeGroup{std::move(*type), static_cast<int>(Declared<std::int64_t>(gpar, "nodes", errors))});
        }
      }
    }
  } else if (merged->Get({"node"})) {
    add_group({"node"}, static_cast<int>(Declared<std::int64_t>(p, "nodes", errors)));
  } else {
    errors.Add(merged->Where({}), absl::StrCat(owner, ": give 'node' (a node type) or 'groups'"));
  }
  if (errors.size() != before) return nullptr;
  auto cluster = Cluster::Build(name, std::move(groups), options);
  if (!cluster.ok()) {
    // Too large: the node count the user gave is the thing to change.
    const KeyPath nodes_key = Child(section, "nodes");
    const SourceLoc where = absl::IsResourceExhausted(cluster.status())
                                ? doc.Where(doc.Get(nodes_key) ? nodes_key : section)
                                : merged->Where({});
    errors.Add(where, std::string(cluster.status().message()));
    return nullptr;
  }
  return std::make_shared<const Cluster>(std::move(*cluster));
}

}  // namespace testbed
