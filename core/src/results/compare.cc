#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "testbed/component.h"

namespace testbed {

double MetricChange::Absolute() const noexcept { return std::abs(new_value - old_value); }

double MetricChange::Relative() const noexcept {
  const double scale = std::max(std::abs(old_value), std::abs(new_value));
  return scale > 0 ? Absolute() / scale : 0.0;
}

bool Comparison::Differs() const noexcept {
  if (!only_old.empty() || !only_new.empty() || !runs.empty()) return true;
  return std::any_of(metrics.begin(), metrics.end(), [](const MetricChange& m) { return m.flagged; });
}

bool SelfMeasured(const std::string& m) {
  static const std::set<std::string> kNames = {"schedule_build_s",        "simulation_wall_s",
                                               "simulator_memory_mib",    "process_peak_memory_mib",
                                               "planning_time_s",         "balancer_search_s_per_call",
                                               "duplicate_detection_s_per_step", "tp_planning_s"};
  if (kNames.count(m) > 0 || absl::StartsWith(m, "measured_")) return true;
  for (ComponentKind k : kAllComponentKinds) {
    if (m == std::string(KindName(k)) + "_time_s") return true;
  }
  return false;
}

namespace {

std::map<std::string, const Metric*> MetricsOf(const StoredRun& r) {
  std::map<std::string, const Metric*> out;
  for (const Metric& m : r.output.metrics.all()) out[m.name] = &m;
  return out;
}

void ConfigLines(const StoredRun& a, const StoredRun& b, RunChange& c) {
  const std::vector<std::string> la = absl::StrSplit(a.config_toml, '\n'), lb = absl::StrSplit(b.config_toml, '\n');
  const std::multiset<std::string> sa(la.begin(), la.end()), sb(lb.begin(), lb.end());
  for (const std::string& l : la) {
    if (sb.count(l) == 0) c.removed_lines.push_back(l);
  }
  for (const std::string& l : lb) {
    if (sa.count(l) == 0) c.added_lines.push_back(l);
  }
}

}  // namespace

Comparison CompareResults(const ResultsFile::Contents& old_file, const ResultsFile::Contents& new_file,
                          const CompareOptions& options) {
  Comparison c;
  c.old_experiment = old_file.header.experiment;
  c.new_experiment = new_file.header.experiment;
  std::map<std::string, const StoredRun*> olds, news;
  for (const StoredRun& r : old_file.runs) olds[r.id] = &r;
  for (const StoredRun& r : new_file.runs) news[r.id] = &r;
  for (const auto& [id, r] : olds) {
    if (news.count(id) == 0) c.only_old.push_back(id);
  }
  for (const StoredRun& n : new_file.runs) {
    auto it = olds.find(n.id);
    if (it == olds.end()) {
      c.only_new.push_back(n.id);
      continue;
    }
    const StoredRun& o = *it->second;
    ++c.compared_runs;
    RunChange rc;
    rc.run = n.id;
    if (o.status != n.status) {
      rc.old_status = o.status;
      rc.new_status = n.status;
    }
    if (o.config_hash != n.config_hash) ConfigLines(o, n, rc);
    const bool config_changed = o.config_hash != n.config_hash;
    if (!rc.old_status.empty() || config_changed) c.runs.push_back(rc);
    const auto mo = MetricsOf(o), mn = MetricsOf(n);
    std::set<std::string> names;
    for (const auto& [k, v] : mo) names.insert(k);
    for (const auto& [k, v] : mn) names.insert(k);
    for (const std::string& name : names) {
      if (!options.self_measured && SelfMeasured(name)) continue;
      ++c.compared_metrics;
      MetricChange m;
      m.run = n.id;
      m.metric = name;
      const auto a = mo.find(name), b = mn.find(name);
      m.in_old = a != mo.end();
      m.in_new = b != mn.end();
      if (m.in_old) m.old_value = a->second->value;
      if (m.in_new) m.new_value = b->second->value;
      m.unit = m.in_new ? b->second->unit : a->second->unit;
      const bool same = m.in_old && m.in_new && (m.old_value == m.new_value ||
                                                 (std::isnan(m.old_value) && std::isnan(m.new_value)));
      if (same) continue;
      m.flagged = !m.in_old || !m.in_new || !(m.Relative() <= options.tolerance);
      c.metrics.push_back(m);
    }
  }
  return c;
}

}  // namespace testbed
