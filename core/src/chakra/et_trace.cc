#include "chakra/et_trace.h"

#include <array>

namespace testbed::chakra {

namespace {

// The schema's enum value names (et_def.proto), indexed by value.
constexpr std::array<const char*, 11> kNodeTypeNames = {
    "INVALID_NODE",   "METADATA_NODE",  "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",       "COMM_SEND_NODE",
    "COMM_RECV_NODE", "COMM_COLL_NODE", "STORAGE_NODE",  "BATCH_NODE",     "CHECKPOINT_NODE"};
constexpr std::array<const char*, 10> kCollTypeNames = {
    "ALL_REDUCE", "REDUCE",    "ALL_GATHER",     "GATHER", "SCATTER", "BROADCAST", "ALL_TO_ALL",
    "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER"};

template <std::size_t N>
const char* NameOf(const std::array<const char*, N>& names, std::int64_t value) noexcept {
  if (value < 0 || value >= static_cast<std::int64_t>(N)) return "UNKNOWN";
  return names[static_cast<std::size_t>(value)];
}

}  // namespace

const char* NodeTypeName(std::int32_t type) noexcept { return NameOf(kNodeTypeNames, type); }

const char* CollTypeName(std::int64_t type) noexcept { return NameOf(kCollTypeNames, type); }

const Attr* Node::Find(const std::string& attr_name) const noexcept {
  for (const Attr& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

}  // namespace testbed::chakra
