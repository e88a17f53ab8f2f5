// Fuzz target: bytes as a results file, read with its tables as `testbed show` and `trace`
// read it. A changed file must be refused or read, never crash the reader (file_seal.h).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "results/results_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("testbed-fuzz-" + std::to_string(::getpid()) + ".h5");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto c = testbed::ResultsFile::Read(file, /*with_tables=*/true);
  (void)c;
  std::error_code ec;
  std::filesystem::remove(file, ec);
  return 0;
}
