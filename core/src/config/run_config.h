// Resolution of one run's merged document into typed settings: [experiment], [train],
// [parallel], the cluster and model (presets expanded), every component with its validated
// parameters, and the backend's own sections. This is where `testbed validate` finds every
// error, before anything runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "config/preset_library.h"
#include "config/schema.h"
#include "testbed/cluster.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/registry.h"

namespace testbed {

struct BackendInfo;

struct ExperimentMeta {
  std::string name;
  std::string paper;
  std::string doc;
  std::string backend = "sim";
  std::int64_t seed = 1;
  std::string output;            // results file
  std::string metric;            // main metric shown in the table
  std::string reference_metric;  // what [reference] figures compare with: "speedup" or a metric
  std::vector<std::string> columns;  // more metrics shown beside `metric` in the table
  std::string timeline;          // "auto" | "on" | "off"
};

struct ComponentChoice {
  std::string name;
  ParamSet params;
};

struct ResolvedRun {
  RunSpec spec;
  ExperimentMeta meta;
  std::uint64_t seed = 0;  // per sweep point: arms at one point see the same randomness
  std::shared_ptr<const Cluster> cluster;
  std::shared_ptr<const ModelGraph> model;
  TrainSettings train;
  ParallelSettings parallel;
  std::map<ComponentKind, ComponentChoice> components;
  std::map<std::string, ParamSet> sections;  // backend sections by name
  // Every resolved value, flattened ("train.micro_batch", "partitioner", "partitioner.tp"),
  // recorded with the results.
  std::vector<std::pair<std::string, ParamValue>> recorded;
  std::string config_toml;
  std::string config_hash;  // of config_toml: identifies a run for resuming

  [[nodiscard]] const ComponentChoice* Component(ComponentKind kind) const {
    auto it = components.find(kind);
    return it == components.end() ? nullptr : &it->second;
  }
};

// Recorded values "library.<kind>" name the plugin and library file that provided each
// component of a run ("core" for built-ins), so that a run made with another library (a
// plugin shadowing another of the same name) is not taken for one already done.
inline constexpr const char* kLibraryKeyPrefix = "library.";

[[nodiscard]] const std::vector<ParamSpec>& ExperimentSchema();
[[nodiscard]] const std::vector<ParamSpec>& TrainSchema();
[[nodiscard]] const std::vector<ParamSpec>& ParallelSchema();

// Reads [experiment] alone (needed before the backend is known).
[[nodiscard]] absl::StatusOr<ExperimentMeta> ResolveMeta(const ConfigDoc& doc);

// What the experiment file itself sets at its top (component choices such as `scheduler = {
// use = ... }`, and each key of its [train], [parallel], [model], [cluster] and backend
// sections), checked even when every arm or sweep value overrides it, so that a wrong name,
// type or range there is reported rather than never looked at. OK, or one error per line.
[[nodiscard]] absl::Status CheckFileSettings(const ConfigDoc& doc, const Registry& registry);

// Resolves a run; every problem is reported at once, one per line.
[[nodiscard]] absl::StatusOr<ResolvedRun> ResolveRun(const RunSpec& spec, const Registry& registry,
                                                     const PresetLibrary& presets);

}  // namespace testbed
