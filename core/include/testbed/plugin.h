// The plugin entry point. A plugin is a shared library exporting exactly one symbol,
// `testbed_plugin` (a Boost.DLL alias with C linkage), that returns a PluginInfo. The loader
// reads `abi_version` before touching anything else and refuses a library built against
// another ABI; then it calls `register_components` once.
//
//   static absl::Status Register(testbed::Registry& r) { return r.Add<testbed::Partitioner>(...); }
//   TESTBED_PLUGIN("myplugin", "1.0.0", "what it does", Register)
#pragma once

#include <cstdint>

#include <boost/dll/alias.hpp>

#include "absl/status/status.h"
#include "testbed/build_identity.h"
#include "testbed/registry.h"

namespace testbed {

// Bumped whenever a public header changes in a way that breaks binary compatibility.
// 3: plans as lists of stages, self-describing tasks, the build identity below.
// 4: tasks pinned to link classes (Task::links), weights split over them (Plan::param_links),
//    the shard_planner kind.
// 5: GNN layers in the model graph (Layer::gnn_*, ModelShape::fanouts), the feature_loader kind.
// 6: StageReplica::resident_bytes, Plan::iterations_per_epoch, FeatureBudget.
// 7: Task::priority, the sparse embedding exchange options.
// 8: ExpandOptions::param_gather_overlap and tp_chunk_time_share, ComputeWork::time_share,
//    ContextParallelism::ring, ParallelSettings::cp_ring.
// 9: Kernel::special_ops, PipelineProgram::p2p_by_direction and the gradients' own
//    point-to-point streams (ExpandOptions::stream_priority has two more).
// 10: LinkKinds is 16 bits wide and holds a NIC rail (Task::links, Plan::param_links);
//     PlanningContext::collective.
// 11: Phase is one byte and Task::work comes before Task::bytes (a task is 72 bytes, not 88);
//     Schedule::AppendCopies.
// 12: a schedule's large arrays come from testbed/kept_blocks.h (Schedule::tasks() is a
//     span), Schedule::micro_batch_ids and chunk_ids, an inline Schedule::deps, the part
//     AppendCopies checked kept in the schedule.
inline constexpr std::uint32_t kAbiVersion = 12;

// The build identity of this compilation (testbed/build_identity.h).
inline constexpr const char* kBuildIdentity = TESTBED_BUILD_IDENTITY;

// Layout rule: `abi_version` stays the first member forever, so that any version of the
// loader can read it from any library. Then, from ABI 3 on, `build`, checked second.
struct PluginInfo {
  std::uint32_t abi_version;  // kAbiVersion of the headers the plugin was built with
  std::uint32_t reserved;     // zero
  // TESTBED_BUILD_IDENTITY of its compilation: testbed version, compiler, C++ library,
  // Abseil; must equal the loader's.
  const char* build;
  const char* name;           // plugin name, e.g. "merak"
  const char* version;        // the plugin's own version, e.g. "1.2.0"
  const char* description;    // one line
  // Registers the plugin's components. An error (or an exception, which the loader catches)
  // unloads the plugin and removes whatever it registered.
  absl::Status (*register_components)(Registry& registry);
};

}  // namespace testbed

#define TESTBED_PLUGIN(NAME, VERSION, DESCRIPTION, REGISTER_FN)                                  \
  namespace {                                                                                    \
  const ::testbed::PluginInfo testbed_plugin_info_value_ = {                                     \
      ::testbed::kAbiVersion, 0u, TESTBED_BUILD_IDENTITY, NAME, VERSION, DESCRIPTION, &REGISTER_FN}; \
  const ::testbed::PluginInfo* testbed_plugin_info_entry_() { return &testbed_plugin_info_value_; } \
  }                                                                                              \
  BOOST_DLL_ALIAS(testbed_plugin_info_entry_, testbed_plugin)
