// Reading the measurements: the embedded copy is the repository's file byte for byte, the
// grid is what the data README describes, and malformed files give errors naming the line.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "measurements.h"

namespace testbed::calibrated {
namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Measurements, EmbeddedCopyIsTheRepositoryFile) {
  const std::string file = ReadWhole(TESTBED_CALIBRATED_CSV);
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(std::string(EmbeddedMeasurementsCsv()), file);
}

TEST(Measurements, EmbeddedGridIsComplete) {
  auto rows = ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 108u);  // 3 hidden sizes x 6 TP degrees x 6 micro-batches
  std::set<std::int64_t> hidden;
  int ran = 0;
  for (const Measurement& m : *rows) {
    hidden.insert(m.hidden);
    const bool all_ran = m.attn_fp_ms > 0 && m.attn_bp_ms > 0 && m.mlp_fp_ms > 0 && m.mlp_bp_ms > 0;
    const bool none_ran = m.attn_fp_ms < 0 && m.attn_bp_ms < 0 && m.mlp_fp_ms < 0 && m.mlp_bp_ms < 0;
    EXPECT_TRUE(all_ran || none_ran) << "line " << m.line;
    ran += all_ran ? 1 : 0;
  }
  EXPECT_EQ(hidden, (std::set<std::int64_t>{1024, 2048, 4096}));
  EXPECT_EQ(ran, 82);
}

TEST(Measurements, ColumnsInAnyOrderAndCrlf) {
  auto rows = ParseMeasurements(
      "tp,hidden,micro_batch,mlp_bp_ms,mlp_fp_ms,attn_bp_ms,attn_fp_ms\r\n2,1024,4,4,3,2,1\r\n", "t.csv");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const Measurement& m = (*rows)[0];
  EXPECT_EQ(m.hidden, 1024);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.micro_batch, 4);
  EXPECT_EQ(m.attn_fp_ms, 1);
  EXPECT_EQ(m.mlp_bp_ms, 4);
  EXPECT_EQ(m.comm_ms, -1);  // optional column absent
  EXPECT_EQ(m.line, 2);
}

TEST(Measurements, ErrorsNameTheFileLineAndColumn) {
  auto missing = ParseMeasurements("hidden,tp,micro_batch,attn_fp_ms\n", "a.csv");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("a.csv:1"), std::string::npos) << missing.status();
  EXPECT_NE(missing.status().message().find("attn_bp_ms"), std::string::npos) << missing.status();

  const std::string header = "hidden,tp,micro_batch,attn_fp_ms,attn_bp_ms,mlp_fp_ms,mlp_bp_ms\n";
  auto bad_number = ParseMeasurements(header + "1024,1,1,1,2,x,4\n", "b.csv");
  EXPECT_EQ(bad_number.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_number.status().message().find("b.csv:2: column 'mlp_fp_ms'"), std::string::npos)
      << bad_number.status();

  auto bad_size = ParseMeasurements(header + "1024,0,1,1,2,3,4\n", "c.csv");
  EXPECT_NE(bad_size.status().message().find("column 'tp'"), std::string::npos) << bad_size.status();

  auto short_row = ParseMeasurements(header + "1024,1,1\n", "d.csv");
  EXPECT_EQ(short_row.status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(ParseMeasurements("", "e.csv").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadMeasurementsFile((std::filesystem::temp_directory_path() / "no-such-measurements.csv").string())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace testbed::calibrated
