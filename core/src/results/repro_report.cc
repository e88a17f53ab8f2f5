#include "results/repro_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace testbed {
namespace {

std::string Num(const std::optional<double>& v, const char* fmt = "%.4g") {
  return v ? absl::StrFormat(fmt, *v) : std::string("");
}

std::string Html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Md(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string Rule(double tolerance) {
  return absl::StrFormat(
      "Verdict rule: *reproduced* when every figure the experiment compares with the paper is within %g%% "
      "(%.2f <= ours / paper <= %.2f), *partly* when some are, *not* when none is (a failed run counts as not "
      "within), *no figures* when the experiment gives none.",
      tolerance * 100, 1 - tolerance, 1 + tolerance);
}

std::string Summary(const Verdict& v, double tolerance) {
  if (v.kind == Verdict::Kind::kNoFigures) return "no paper figures to compare with";
  return absl::StrCat(v.within, " of ", v.compared, " figures within ", absl::StrFormat("%g%%", tolerance * 100),
                      v.failed > 0 ? absl::StrCat(" (", v.failed, " runs failed)") : "");
}

}  // namespace

const char* VerdictName(Verdict::Kind kind) noexcept {
  switch (kind) {
    case Verdict::Kind::kReproduced: return "reproduced";
    case Verdict::Kind::kPartly: return "partly";
    case Verdict::Kind::kNot: return "not";
    case Verdict::Kind::kNoFigures: return "no figures";
  }
  return "?";
}

Verdict Judge(const std::vector<ReportRow>& rows, double tolerance) {
  Verdict v;
  for (const ReportRow& r : rows) {
    if (!r.reference) continue;
    ++v.compared;
    if (r.status != "ok" || !r.ratio) {
      ++v.failed;
      continue;
    }
    if (std::fabs(*r.ratio - 1.0) <= tolerance + 1e-12) ++v.within;
  }
  if (v.compared == 0) {
    v.kind = Verdict::Kind::kNoFigures;
  } else if (v.within == v.compared) {
    v.kind = Verdict::Kind::kReproduced;
  } else if (v.within > 0) {
    v.kind = Verdict::Kind::kPartly;
  } else {
    v.kind = Verdict::Kind::kNot;
  }
  return v;
}

std::string ReportMarkdown(const std::vector<ReportSection>& sections, double tolerance) {
  std::string out = "# Reproduction report\n\n";
  absl::StrAppend(&out, Rule(tolerance), "\n\n| experiment | paper | verdict | figures |\n|---|---|---|---|\n");
  for (const ReportSection& s : sections) {
    absl::StrAppend(&out, "| ", Md(s.header.experiment), " | ", Md(s.header.paper), " | ", VerdictName(s.verdict.kind),
                    " | ", Summary(s.verdict, tolerance), " |\n");
  }
  for (const ReportSection& s : sections) {
    absl::StrAppend(&out, "\n## ", Md(s.header.experiment), "\n\n", Md(s.header.paper), "\n\nFile `", s.file,
                    "`, backend ", s.header.backend, ". **", VerdictName(s.verdict.kind), "**: ",
                    Summary(s.verdict, tolerance), ".\n\n");
    const std::string unit = s.rows.empty() ? "" : s.rows.front().unit;
    absl::StrAppend(&out, "| arm | point | ", Md(s.header.metric), unit.empty() ? "" : absl::StrCat(" [", unit, "]"),
                    " | ", Md(s.header.reference_metric), " | paper | ours / paper | status |\n|---|---|---|---|---|---|---|\n");
    for (const ReportRow& r : s.rows) {
      absl::StrAppend(&out, "| ", Md(r.arm), " | ", Md(r.point), " | ", Num(r.value), " | ", Num(r.speedup, "%.3f"),
                      " | ", Num(r.reference, "%.3g"), " | ", Num(r.ratio, "%.2f"), " | ", r.status, " |\n");
    }
    if (!s.figure.empty()) absl::StrAppend(&out, "\n![", Md(s.header.experiment), "](", s.figure, ")\n");
  }
  return out;
}

std::string ReportHtml(const std::vector<ReportSection>& sections, double tolerance) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Reproduction report</title>\n"
      "<style>body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
      ".reproduced{color:#060}.partly{color:#a60}.not{color:#a00}</style></head><body>\n<h1>Reproduction report</h1>\n";
  absl::StrAppend(&out, "<p>", Html(Rule(tolerance)), "</p>\n<table><tr><th>experiment</th><th>paper</th><th>verdict</th>"
                        "<th>figures</th></tr>\n");
  auto cls = [](Verdict::Kind k) {
    std::string n = VerdictName(k);
    return n == "no figures" ? std::string("none") : n;
  };
  for (const ReportSection& s : sections) {
    absl::StrAppend(&out, "<tr><td>", Html(s.header.experiment), "</td><td>", Html(s.header.paper), "</td><td class=\"",
                    cls(s.verdict.kind), "\">", VerdictName(s.verdict.kind), "</td><td>", Html(Summary(s.verdict, tolerance)),
                    "</td></tr>\n");
  }
  out += "</table>\n";
  for (const ReportSection& s : sections) {
    absl::StrAppend(&out, "<h2>", Html(s.header.experiment), "</h2>\n<p>", Html(s.header.paper), "</p>\n<p>File <code>",
                    Html(s.file), "</code>, backend ", Html(s.header.backend), ". <b class=\"", cls(s.verdict.kind), "\">",
                    VerdictName(s.verdict.kind), "</b>: ", Html(Summary(s.verdict, tolerance)), ".</p>\n");
    const std::string unit = s.rows.empty() ? "" : s.rows.front().unit;
    absl::StrAppend(&out, "<table><tr><th>arm</th><th>point</th><th>", Html(s.header.metric),
                    unit.empty() ? "" : Html(absl::StrCat(" [", unit, "]")), "</th><th>", Html(s.header.reference_metric),
                    "</th><th>paper</th><th>ours / paper</th><th>status</th></tr>\n");
    for (const ReportRow& r : s.rows) {
      absl::StrAppend(&out, "<tr><td>", Html(r.arm), "</td><td>", Html(r.point), "</td><td>", Num(r.value), "</td><td>",
                      Num(r.speedup, "%.3f"), "</td><td>", Num(r.reference, "%.3g"), "</td><td>", Num(r.ratio, "%.2f"),
                      "</td><td>", Html(r.status), "</td></tr>\n");
    }
    out += "</table>\n";
    if (!s.figure.empty()) absl::StrAppend(&out, "<p><img src=\"", Html(s.figure), "\" alt=\"", Html(s.header.experiment), "\"></p>\n");
  }
  return out + "</body></html>\n";
}

}  // namespace testbed
