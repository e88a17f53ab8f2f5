#include "kernel_bench.h"

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

constexpr const char* kColumns[] = {"kind", "impl", "precision", "b", "m", "n", "k", "causal", "measured_tflops", "source"};

}  // namespace

const char* BenchKindName(BenchKind kind) noexcept {
  switch (kind) {
    case BenchKind::kGemm: return "gemm";
    case BenchKind::kFlashForward: return "flash_forward";
    case BenchKind::kFlashBackward: return "flash_backward";
    case BenchKind::kMemory: return "memory";
  }
  return "?";
}

double KernelBenchRow::Flops() const noexcept {
  const double bb = static_cast<double>(b), mm = static_cast<double>(m), nn = static_cast<double>(n);
  const double kk = static_cast<double>(k);
  if (kind == BenchKind::kGemm) return 2.0 * bb * mm * nn * kk;
  if (kind == BenchKind::kMemory) return 0.0;
  const double forward = (causal ? 2.0 : 4.0) * bb * mm * nn * nn * kk;
  return kind == BenchKind::kFlashBackward ? 2.5 * forward : forward;
}

double KernelBenchRow::SpecialOps() const noexcept {
  if (kind == BenchKind::kGemm || kind == BenchKind::kMemory) return 0.0;
  return (causal ? 0.5 : 1.0) * static_cast<double>(b) * static_cast<double>(m) * static_cast<double>(n) *
         static_cast<double>(n);
}

double KernelBenchRow::Bytes() const noexcept {
  const double bb = static_cast<double>(b), mm = static_cast<double>(m), nn = static_cast<double>(n);
  const double kk = static_cast<double>(k);
  const double in = ElementBytes(precision);
  if (kind == BenchKind::kMemory) return in * mm * bb * nn;
  if (kind == BenchKind::kGemm) {
    const double out = precision == Precision::kFp8 ? 2.0 : in;
    return bb * (in * (mm * kk + kk * nn) + out * mm * nn);
  }
  return in * (kind == BenchKind::kFlashBackward ? 8.0 : 4.0) * bb * mm * nn * kk;
}

absl::StatusOr<std::vector<KernelBenchRow>> ParseKernelBench(absl::string_view text, absl::string_view source) {
  std::vector<KernelBenchRow> rows;
  std::map<std::string, std::size_t> column;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    const auto where = [&](absl::string_view col) {
      return absl::StrCat(std::string(source), ":", line_no, ": column '", std::string(col), "': ");
    };
    if (column.empty()) {
      for (std::size_t i = 0; i < cells.size(); ++i) column[std::string(absl::StripAsciiWhitespace(cells[i]))] = i;
      for (const char* name : kColumns) {
        if (column.count(name) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              std::string(source), ":", line_no, ": header lacks the column '", name,
              "' (expected kind,impl,precision,b,m,n,k,causal,measured_tflops,source)"));
        }
      }
      continue;
    }
    if (cells.size() != column.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(source), ":", line_no, ": ", cells.size(), " cells, the header has ", column.size()));
    }
    const auto cell = [&](const char* col) { return absl::StripAsciiWhitespace(cells[column.at(col)]); };
    KernelBenchRow r;
    r.line = line_no;
    const absl::string_view kind = cell("kind");
    if (kind == "gemm") {
      r.kind = BenchKind::kGemm;
    } else if (kind == "flash_forward") {
      r.kind = BenchKind::kFlashForward;
    } else if (kind == "flash_backward") {
      r.kind = BenchKind::kFlashBackward;
    } else if (kind == "memory") {
      r.kind = BenchKind::kMemory;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where("kind"), "'", std::string(kind),
                                                     "' is not a kernel kind (expected gemm, flash_forward, "
                                                     "flash_backward or memory)"));
    }
    r.impl = std::string(cell("impl"));
    r.source = std::string(cell("source"));
    const std::optional<Precision> p = PrecisionFromName(cell("precision"));
    if (!p) {
      return absl::InvalidArgumentError(
          absl::StrCat(where("precision"), "'", std::string(cell("precision")), "' is not a precision (bf16, fp16, fp8, ...)"));
    }
    r.precision = *p;
    for (auto [col, out] : {std::pair{"b", &r.b}, {"m", &r.m}, {"n", &r.n}, {"k", &r.k}}) {
      if (!absl::SimpleAtoi(cell(col), out) || *out < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(col), "'", std::string(cell(col)), "' is not a positive integer"));
      }
    }
    int causal = 0;
    if (!absl::SimpleAtoi(cell("causal"), &causal) || (causal != 0 && causal != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(where("causal"), "'", std::string(cell("causal")), "' is not 0 or 1"));
    }
    r.causal = causal == 1;
    if (r.kind == BenchKind::kMemory) {
      if (column.count("measured_tb_per_s") == 0) {
        return absl::InvalidArgumentError(absl::StrCat(std::string(source), ":", line_no, ": a memory row needs the "
                                                       "column 'measured_tb_per_s', which the header lacks"));
      }
      if (!absl::SimpleAtod(cell("measured_tb_per_s"), &r.measured_tb_per_s) || !std::isfinite(r.measured_tb_per_s) ||
          r.measured_tb_per_s <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(where("measured_tb_per_s"), "'",
                                                       std::string(cell("measured_tb_per_s")),
                                                       "' is not a positive number of TB/s"));
      }
    } else if (!absl::SimpleAtod(cell("measured_tflops"), &r.measured_tflops) || !std::isfinite(r.measured_tflops) ||
               r.measured_tflops <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where("measured_tflops"), "'", std::string(cell("measured_tflops")),
                                                     "' is not a positive number of TFLOP/s"));
    }
    rows.push_back(std::move(r));
  }
  if (column.empty()) return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": no header line"));
  return rows;
}

absl::StatusOr<std::vector<KernelBenchRow>> ReadKernelBenchFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open kernel benchmark file '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseKernelBench(text.str(), path);
}

}  // namespace testbed::calibrated
