#include "measurements.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace testbed::calibrated {
namespace {

constexpr const char* kRequired[] = {"hidden",    "tp",        "micro_batch", "attn_fp_ms",
                                     "attn_bp_ms", "mlp_fp_ms", "mlp_bp_ms"};

}  // namespace

absl::StatusOr<std::vector<Measurement>> ParseMeasurements(absl::string_view text, absl::string_view source) {
  std::vector<Measurement> rows;
  std::map<std::string, std::size_t> column;  // header name -> index
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);  // also drops the '\r' of CRLF files
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    auto where = [&](absl::string_view col) {
      return absl::StrCat(std::string(source), ":", line_no, ": column '", std::string(col), "'");
    };
    if (column.empty()) {
      for (std::size_t i = 0; i < cells.size(); ++i) {
        column[std::string(absl::StripAsciiWhitespace(cells[i]))] = i;
      }
      for (const char* name : kRequired) {
        if (column.count(name) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(std::string(source), ":", line_no, ": header lacks the column '", name,
                           "' (expected hidden,tp,micro_batch,attn_fp_ms,attn_bp_ms,mlp_fp_ms,mlp_bp_ms)"));
        }
      }
      continue;
    }
    if (cells.size() != column.size()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(source), ":", line_no, ": ", cells.size(),
                                                     " cells, the header has ", column.size()));
    }
    auto number = [&](const char* col, double* out) -> absl::Status {
      auto it = column.find(col);
      if (it == column.end()) return absl::OkStatus();  // optional column absent
      absl::string_view cell = absl::StripAsciiWhitespace(cells[it->second]);
      if (!absl::SimpleAtod(cell, out) || !std::isfinite(*out)) {
        return absl::InvalidArgumentError(absl::StrCat(where(col), ": '", std::string(cell), "' is not a number"));
      }
      return absl::OkStatus();
    };
    auto size = [&](const char* col, std::int64_t* out) -> absl::Status {
      absl::string_view cell = absl::StripAsciiWhitespace(cells[column.at(col)]);
      if (!absl::SimpleAtoi(cell, out) || *out < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(col), ": '", std::string(cell), "' is not a positive integer"));
      }
      return absl::OkStatus();
    };
    Measurement m;
    m.line = line_no;
    for (absl::Status st : {size("hidden", &m.hidden), size("tp", &m.tp), size("micro_batch", &m.micro_batch),
                            number("attn_fp_ms", &m.attn_fp_ms), number("attn_bp_ms", &m.attn_bp_ms),
                            number("mlp_fp_ms", &m.mlp_fp_ms), number("mlp_bp_ms", &m.mlp_bp_ms),
                            number("comm_ms", &m.comm_ms), number("runtime_memory_mb", &m.runtime_memory_mb)}) {
      if (!st.ok()) return st;
    }
    rows.push_back(m);
  }
  if (column.empty()) return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": no header line"));
  return rows;
}

absl::StatusOr<std::vector<Measurement>> ReadMeasurementsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open measurements file '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseMeasurements(text.str(), path);
}

}  // namespace testbed::calibrated
