// Repetitions over seeds summarised as mean and standard deviation (see report.h).
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "results/report.h"

namespace testbed {
namespace {

struct Group {
  ReportRow first;
  std::vector<double> values, speedups, ratios;
  std::vector<std::vector<double>> columns;  // per extra column, the runs that report it
};

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

std::vector<ReportRow> SummariseSeeds(const ResultsHeader& header, const std::vector<ReportRow>& rows) {
  const auto at = std::find(header.sweep_keys.begin(), header.sweep_keys.end(), kSeedSweepKey);
  if (at == header.sweep_keys.end()) return rows;
  const size_t seed_index = static_cast<size_t>(at - header.sweep_keys.begin());
  std::vector<ReportRow> out;
  std::vector<std::pair<std::string, std::string>> order;  // (point, arm) in first-seen order
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const ReportRow& r : rows) {
    std::vector<std::string> parts = absl::StrSplit(r.point, ',');
    if (r.status != "ok" || !r.value || parts.size() != header.sweep_keys.size()) {
      out.push_back(r);
      continue;
    }
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(seed_index));
    const auto key = std::make_pair(absl::StrJoin(parts, ","), r.arm);
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh) {
      order.push_back(key);
      it->second.first = r;
      it->second.first.point = key.first;
    }
    it->second.values.push_back(*r.value);
    if (r.speedup) it->second.speedups.push_back(*r.speedup);
    if (r.ratio) it->second.ratios.push_back(*r.ratio);
    it->second.columns.resize(r.columns.size());
    for (size_t c = 0; c < r.columns.size(); ++c) {
      if (r.columns[c]) it->second.columns[c].push_back(*r.columns[c]);
    }
  }
  std::vector<ReportRow> summary;
  for (const auto& key : order) {
    const Group& g = groups.at(key);
    ReportRow row = g.first;
    row.samples = static_cast<int>(g.values.size());
    row.value = Mean(g.values);
    double ss = 0;
    for (double x : g.values) ss += (x - *row.value) * (x - *row.value);
    row.stddev = g.values.size() > 1 ? std::sqrt(ss / static_cast<double>(g.values.size() - 1)) : 0.0;
    row.speedup = g.speedups.size() == g.values.size() ? std::optional<double>(Mean(g.speedups)) : std::nullopt;
    row.ratio = g.ratios.size() == g.values.size() ? std::optional<double>(Mean(g.ratios)) : std::nullopt;
    for (size_t c = 0; c < row.columns.size() && c < g.columns.size(); ++c) {
      row.columns[c] = g.columns[c].size() == g.values.size() ? std::optional<double>(Mean(g.columns[c])) : std::nullopt;
    }
    row.run = absl::StrCat(row.arm, "@", row.point, " (", row.samples, " seeds)");
    summary.push_back(std::move(row));
  }
  summary.insert(summary.end(), out.begin(), out.end());
  return summary;
}

}  // namespace testbed
