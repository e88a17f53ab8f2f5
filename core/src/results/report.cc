#include "results/report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace testbed {
namespace {

std::string Num(double v) {
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) return absl::StrFormat("%.4g", v);
  if (a >= 1000) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.4g", v);
}

std::string Opt(const std::optional<double>& v, const char* fmt = nullptr) {
  if (!v) return "";
  if (fmt) {
    // A format chosen at run time (absl::StrFormat wants one known at compile time).
    char buf[64];
    std::snprintf(buf, sizeof(buf), fmt, *v);
    return buf;
  }
  return Num(*v);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Characters on screen of UTF-8 text (continuation bytes do not count).
size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string CsvNum(const std::optional<double>& v) { return v ? absl::StrFormat("%.10g", *v) : ""; }

}  // namespace

std::vector<ReportRow> BuildReport(const ResultsHeader& header, const std::vector<StoredRun>& runs) {
  auto order_of = [](const std::vector<std::string>& list, const std::string& x) {
    auto it = std::find(list.begin(), list.end(), x);
    return it == list.end() ? list.size() : static_cast<size_t>(it - list.begin());
  };
  std::vector<const StoredRun*> sorted;
  for (const StoredRun& r : runs) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const StoredRun* a, const StoredRun* b) {
    auto ka = std::tuple(order_of(header.points, a->point), order_of(header.arms, a->arm), a->index);
    auto kb = std::tuple(order_of(header.points, b->point), order_of(header.arms, b->arm), b->index);
    return ka < kb;
  });
  const std::string baseline_arm = header.arms.empty() ? std::string() : header.arms.front();
  std::map<std::string, const Metric*> baseline;  // point -> baseline's main metric
  for (const StoredRun* r : sorted) {
    if (r->arm == baseline_arm && r->status == "ok") baseline[r->point] = r->output.metrics.Find(header.metric);
  }
  std::vector<ReportRow> rows;
  for (const StoredRun* r : sorted) {
    ReportRow row;
    row.run = r->id;
    row.arm = r->arm;
    row.point = r->point;
    row.status = r->status;
    row.error = r->error;
    row.metric = header.metric;
    const Metric* m = r->status == "ok" ? r->output.metrics.Find(header.metric) : nullptr;
    for (const std::string& c : header.columns) {
      const Metric* cm = r->status == "ok" ? r->output.metrics.Find(c) : nullptr;
      row.columns.push_back(cm != nullptr ? std::optional<double>(cm->value) : std::nullopt);
    }
    if (m != nullptr) {
      row.value = m->value;
      row.unit = m->unit;
      auto b = baseline.find(r->point);
      if (b != baseline.end() && b->second != nullptr && b->second->value > 0 && m->value > 0) {
        if (m->better == Better::kHigher) row.speedup = m->value / b->second->value;
        if (m->better == Better::kLower) row.speedup = b->second->value / m->value;
      }
    }
    for (const StoredReference& ref : header.references) {
      if (ref.arm == r->arm && (ref.point == r->point || ref.point.empty())) {
        row.reference = ref.value;
        if (ref.point == r->point) break;  // an exact point beats an arm-wide figure
      }
    }
    if (row.reference && *row.reference != 0) {
      std::optional<double> ours;
      if (header.reference_metric == "speedup") {
        ours = row.speedup;
      } else if (r->status == "ok") {
        if (const Metric* rm = r->output.metrics.Find(header.reference_metric)) ours = rm->value;
      }
      if (ours) row.ratio = *ours / *row.reference;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FormatReport(const ResultsHeader& header, const std::vector<ReportRow>& all_rows) {
  const std::vector<ReportRow> rows = SummariseSeeds(header, all_rows);
  std::vector<std::string> point_keys = header.sweep_keys;
  bool seeds = false;
  for (const ReportRow& r : rows) seeds = seeds || r.stddev.has_value();
  if (seeds) point_keys.erase(std::find(point_keys.begin(), point_keys.end(), kSeedSweepKey));
  std::string unit;
  for (const ReportRow& r : rows) {
    if (!r.unit.empty()) {
      unit = r.unit;
      break;
    }
  }
  const std::string point_title = point_keys.empty() ? "point" : absl::StrJoin(point_keys, ",");
  const std::string ref_title =
      header.reference_metric == "speedup" ? "paper speedup" : absl::StrCat("paper ", header.reference_metric);
  std::vector<std::vector<std::string>> cells = {
      {"arm", point_title, absl::StrCat(header.metric, unit.empty() ? "" : absl::StrCat(" [", unit, "]")),
       "speedup", ref_title, "ours/paper", "status"}};
  cells[0].insert(cells[0].begin() + 3, header.columns.begin(), header.columns.end());
  for (const ReportRow& r : rows) {
    std::string value = Opt(r.value);
    if (r.stddev) value = absl::StrCat(value, " ± ", Num(*r.stddev), " (", r.samples, ")");
    cells.push_back({r.arm, r.point, value, Opt(r.speedup, "%.3fx"), Opt(r.reference), Opt(r.ratio, "%.2f"), r.status});
    for (size_t c = 0; c < header.columns.size(); ++c) {
      cells.back().insert(cells.back().begin() + 3 + static_cast<std::ptrdiff_t>(c),
                          c < r.columns.size() ? Opt(r.columns[c]) : std::string());
    }
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], DisplayWidth(row[i]));
  }
  std::string out;
  if (!header.experiment.empty()) {
    absl::StrAppend(&out, header.experiment, header.paper.empty() ? "" : absl::StrCat("  (", header.paper, ")"), "\n");
  }
  for (size_t r = 0; r < cells.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < cells[r].size(); ++i) {
      const bool right = i >= 2 && i + 1 < cells[r].size();
      const std::string& c = cells[r][i];
      const std::string pad(width[i] - DisplayWidth(c), ' ');
      absl::StrAppend(&line, i ? "  " : "", right ? pad + c : c + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
    if (r == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      absl::StrAppend(&out, std::string(total - 2, '-'), "\n");
    }
  }
  if (seeds) absl::StrAppend(&out, "(mean ± sample standard deviation over seeds, number of seeds in brackets)\n");
  for (const ReportRow& r : rows) {
    if (r.status != "ok") absl::StrAppend(&out, "failed ", r.run, ": ", r.error, "\n");
  }
  return out;
}

std::string FormatReportCsv(const std::vector<ReportRow>& rows) {
  std::string out = "run,arm,point,metric,value,unit,speedup,reference,ratio\n";
  for (const ReportRow& r : rows) {
    absl::StrAppend(&out, CsvField(r.run), ",", CsvField(r.arm), ",", CsvField(r.point), ",", CsvField(r.metric), ",",
                    CsvNum(r.value), ",", CsvField(r.unit), ",", CsvNum(r.speedup), ",", CsvNum(r.reference), ",",
                    CsvNum(r.ratio), "\n");
  }
  return out;
}

}  // namespace testbed
