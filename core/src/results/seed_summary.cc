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
    row.run = absl::StrCat(row.arm, "@", row.point, " (", row.samples, " seeds)");
    summary.push_back(std::move(row));
  }
  summary.insert(summary.end(), out.begin(), out.end());
  return summary;
}

}  // namespace testbed
