#include "results/plot_data.h"

#include <cmath>
#include <cstdio>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

template <typename T>
std::string List(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ",";
    if constexpr (std::is_same_v<T, std::string>) {
      out += Quote(v[i]);
    } else if constexpr (std::is_same_v<T, double>) {
      out += Number(v[i]);
    } else {
      out += std::to_string(v[i]);
    }
  }
  return out + "]";
}

std::string TableJson(const Table& t) {
  std::string out = absl::StrCat("{\"name\":", Quote(t.name), ",\"columns\":[");
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const Column& c = t.columns[i];
    if (i) out += ",";
    absl::StrAppend(&out, "{\"name\":", Quote(c.name), ",\"unit\":", Quote(c.unit), ",\"values\":",
                    std::visit([](const auto& v) { return List(v); }, c.values), "}");
  }
  return out + "]}";
}

}  // namespace

std::string PlotDataJson(const ResultsFile::Contents& contents) {
  const ResultsHeader& h = contents.header;
  std::string out = absl::StrCat("{\"experiment\":", Quote(h.experiment), ",\"paper\":", Quote(h.paper),
                                 ",\"backend\":", Quote(h.backend), ",\"metric\":", Quote(h.metric),
                                 ",\"reference_metric\":", Quote(h.reference_metric), ",\"arms\":", List(h.arms),
                                 ",\"points\":", List(h.points), ",\"references\":[");
  for (size_t i = 0; i < h.references.size(); ++i) {
    const StoredReference& r = h.references[i];
    absl::StrAppend(&out, i ? "," : "", "{\"arm\":", Quote(r.arm), ",\"point\":", Quote(r.point),
                    ",\"value\":", Number(r.value), "}");
  }
  out += "],\"runs\":[";
  for (size_t i = 0; i < contents.runs.size(); ++i) {
    const StoredRun& r = contents.runs[i];
    absl::StrAppend(&out, i ? "," : "", "{\"id\":", Quote(r.id), ",\"arm\":", Quote(r.arm), ",\"point\":", Quote(r.point),
                    ",\"status\":", Quote(r.status), ",\"error\":", Quote(r.error), ",\"metrics\":{");
    const auto& metrics = r.output.metrics.all();
    for (size_t m = 0; m < metrics.size(); ++m) {
      absl::StrAppend(&out, m ? "," : "", Quote(metrics[m].name), ":[", Number(metrics[m].value), ",",
                      Quote(metrics[m].unit), "]");
    }
    out += "},\"tables\":[";
    bool first = true;
    for (const Table& t : r.output.tables) {
      if (t.name == "timeline") continue;
      absl::StrAppend(&out, first ? "" : ",", TableJson(t));
      first = false;
    }
    out += "]}";
  }
  return out + "]}\n";
}

}  // namespace testbed
