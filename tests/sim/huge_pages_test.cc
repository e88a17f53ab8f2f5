// The huge-page helpers (core/src/huge_pages.h) behave as reserve and assign do, and, where the
// kernel offers transparent huge pages, leave the advice on the aligned part of the buffer.
#include "huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace testbed {
namespace {

constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;

// The THPeligible flag of the mapping that holds `address` in /proc/self/smaps; -1 if none.
int ThpEligible(std::uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= address && address < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

TEST(HugePages, AssignAndReserveKeepTheContents) {
  std::vector<std::int64_t> v;
  AssignHuge(v, size_t{3} << 20, std::int64_t{7});
  ASSERT_EQ(v.size(), size_t{3} << 20);
  EXPECT_EQ(std::count(v.begin(), v.end(), 7), static_cast<std::ptrdiff_t>(v.size()));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  ReserveHuge(v, v.size() * 4);
  EXPECT_GE(v.capacity(), v.size() * 4);
  for (size_t i = 0; i < v.size(); i += 4099) ASSERT_EQ(v[i], static_cast<std::int64_t>(i));
  // Assigning fewer than the capacity reuses the buffer.
  const std::int64_t* data = v.data();
  AssignHuge(v, 10, std::int64_t{-1});
  EXPECT_EQ(v.data(), data);
  EXPECT_EQ(v, std::vector<std::int64_t>(10, -1));
}

TEST(HugePages, TheAlignedPartOfALargeBufferIsAdvised) {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(mode, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "transparent huge pages are off on this machine ('" << modes << "')";
  }
  std::vector<char> v;
  ReserveHuge(v, 16 << 20);
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t aligned = (begin + kHuge - 1) & ~(kHuge - 1);
  ASSERT_LT(aligned + kHuge, begin + v.capacity());
  const int eligible = ThpEligible(aligned);
  if (eligible < 0) GTEST_SKIP() << "this kernel's smaps has no THPeligible field";
  EXPECT_EQ(eligible, 1) << "huge pages were not asked for (modes: " << modes << ")";
}

}  // namespace
}  // namespace testbed
