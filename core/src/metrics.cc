#include "absl/strings/string_view.h"
#include "testbed/metrics.h"

namespace testbed {

void MetricSet::Add(std::string name, double value, std::string unit, Better better) {
  for (Metric& m : metrics_) {
    if (m.name == name) {
      m.value = value;
      m.unit = std::move(unit);
      m.better = better;
      return;
    }
  }
  metrics_.push_back(Metric{std::move(name), value, std::move(unit), better});
}

const Metric* MetricSet::Find(absl::string_view name) const noexcept {
  for (const Metric& m : metrics_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

void MetricSet::Merge(const MetricSet& other) {
  for (const Metric& m : other.all()) Add(m.name, m.value, m.unit, m.better);
}

Column* Table::Find(absl::string_view column) noexcept {
  for (Column& c : columns) {
    if (c.name == column) return &c;
  }
  return nullptr;
}

const Column* Table::Find(absl::string_view column) const noexcept {
  for (const Column& c : columns) {
    if (c.name == column) return &c;
  }
  return nullptr;
}

}  // namespace testbed
