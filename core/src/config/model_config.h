// Reads a model description ([model] of an experiment, or configs/models/<preset>.toml)
// into a ModelShape, validating every key.
#pragma once

#include <memory>

#include "config/config_doc.h"
#include "config/preset_library.h"
#include "config/schema.h"
#include "testbed/model_graph.h"

namespace testbed {

[[nodiscard]] const std::vector<ParamSpec>& ModelSchema();
// The keys of one measured layer of family "layers" (an entry of `given`, a column of `given_csv`).
[[nodiscard]] const std::vector<ParamSpec>& GivenLayerSchema();

// `section` is the path of the model table in `doc` (["model"] in an experiment). A `preset`
// key loads configs/models/<preset>.toml first; the other keys override it. Problems are
// added to `errors`; the graph is built only when there are none.
[[nodiscard]] std::shared_ptr<const ModelGraph> ResolveModel(const ConfigDoc& doc, const KeyPath& section,
                                                             const PresetLibrary& presets, ErrorList& errors);

// Merges a preset's table with the keys that override it (all but `preset`), keeping
// positions: the helper used for models and clusters alike.
[[nodiscard]] absl::StatusOr<ConfigDoc> MergeWithPreset(const ConfigDoc& doc, const KeyPath& section,
                                                        const PresetLibrary& presets, const std::string& category,
                                                        const std::string& preset_table);

}  // namespace testbed
