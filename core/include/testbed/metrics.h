// What a run produces: named scalars with units (the `metrics` dataset of a run in the
// results file) and optional tables (per device, per link, timeline, loss curve, ...).
#pragma once

#include "absl/strings/string_view.h"
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace testbed {

enum class Better { kHigher, kLower, kNeither };

struct Metric {
  std::string name;  // snake_case with the unit in the name where natural: "iteration_time_s"
  double value = 0.0;
  std::string unit;  // "s", "samples/s", "B", "1" for ratios
  Better better = Better::kNeither;
};

class MetricSet {
 public:
  // Adds or replaces.
  void Add(std::string name, double value, std::string unit, Better better = Better::kNeither);
  [[nodiscard]] const Metric* Find(absl::string_view name) const noexcept;
  [[nodiscard]] const std::vector<Metric>& all() const noexcept { return metrics_; }
  [[nodiscard]] bool empty() const noexcept { return metrics_.empty(); }
  void Merge(const MetricSet& other);

 private:
  std::vector<Metric> metrics_;
};

// A column-oriented table; stored as a group with one dataset per column.
struct Column {
  std::string name;
  std::string unit;
  std::variant<std::vector<double>, std::vector<std::int64_t>, std::vector<std::string>> values;
  [[nodiscard]] std::size_t size() const noexcept {
    return std::visit([](const auto& v) { return v.size(); }, values);
  }
};

struct Table {
  std::string name;  // "per_device", "per_link", "timeline", "loss_curve", "balance"
  std::vector<Column> columns;
  [[nodiscard]] Column* Find(absl::string_view column) noexcept;
  [[nodiscard]] const Column* Find(absl::string_view column) const noexcept;
};

struct RunOutput {
  MetricSet metrics;
  std::vector<Table> tables;
  std::vector<std::string> notes;  // human-readable remarks recorded with the run
};

}  // namespace testbed
