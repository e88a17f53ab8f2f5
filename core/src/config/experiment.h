// An experiment file (DESIGN.md §5) expanded into runs: every (arm x point), each with its
// own merged configuration document. Points are the named [[point]] tables (coupled
// settings, e.g. a model with its cluster size) crossed with the [sweep] product.
// Precedence, lowest first: the file, the named point, the sweep value, the arm, then --set
// overrides (a --set on a swept key pins it: that sweep dimension collapses to the one value).
#pragma once

#include "absl/strings/string_view.h"
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config_doc.h"

namespace testbed {

struct RunSpec {
  int index = 0;                // position in the experiment (point-major, then arm)
  std::string id;               // "<arm>@<point>", or "<arm>" when nothing is swept
  std::string arm;
  int arm_index = 0;
  std::string point;            // "gpt-1.5b" or "gpt-1.5b,8" (values joined); "" when no sweep
  int point_index = 0;
  std::vector<std::pair<std::string, std::string>> point_values;  // sweep key -> value text
  ConfigDoc doc;                // the merged configuration of this run
};

struct ArmSpec {
  std::string name;
  std::string doc;
  int index = 0;
};

struct Reference {
  std::string arm;
  std::string point;  // "" applies to every point
  double value = 0;
  SourceLoc where;
};

class Experiment {
 public:
  // Parses the file, applies `sets` ("key=value", value in TOML syntax or a bare string)
  // and expands the runs. Structural errors (no arms, duplicate arm names, a sweep that is
  // not an array, a reference to an unknown arm or point) name the file, line and column.
  [[nodiscard]] static absl::StatusOr<Experiment> Load(const std::filesystem::path& file,
                                                       const std::vector<std::string>& sets);

  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] const std::string& source_text() const noexcept { return source_text_; }
  [[nodiscard]] const std::vector<std::string>& sets() const noexcept { return sets_; }
  [[nodiscard]] const ConfigDoc& doc() const noexcept { return doc_; }
  [[nodiscard]] const std::vector<ArmSpec>& arms() const noexcept { return arms_; }
  [[nodiscard]] const std::vector<std::string>& sweep_keys() const noexcept { return sweep_keys_; }
  [[nodiscard]] const std::vector<std::string>& points() const noexcept { return points_; }
  [[nodiscard]] const std::vector<RunSpec>& runs() const noexcept { return runs_; }
  [[nodiscard]] const std::vector<Reference>& references() const noexcept { return references_; }

 private:
  std::string file_;
  std::string source_text_;
  std::vector<std::string> sets_;
  ConfigDoc doc_;
  std::vector<ArmSpec> arms_;
  std::vector<std::string> sweep_keys_;
  std::vector<std::string> points_;
  std::vector<RunSpec> runs_;
  std::vector<Reference> references_;
};

// The root keys an experiment may have besides component kinds and backend sections.
[[nodiscard]] const std::vector<std::string>& CoreSectionNames();

// Stable 64-bit FNV-1a, for seeds and configuration hashes that must not change between
// builds or platforms.
[[nodiscard]] std::uint64_t StableHash(absl::string_view text, std::uint64_t seed = 0) noexcept;

}  // namespace testbed
