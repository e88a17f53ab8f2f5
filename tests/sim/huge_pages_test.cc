// The huge-page helpers (core/src/huge_pages.h) behave as reserve and assign do, and, where the
// kernel offers transparent huge pages, leave the advice on the aligned part of the buffer.
#include "huge_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace testbed {
namespace {

constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;

// A field of the mapping that holds `address` in /proc/self/smaps (its number); -1 if none.
long SmapsField(std::uintptr_t address, const std::string& field) {
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
    if (inside && line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// The kernel's transparent huge page modes (the selected one in brackets), and whether they
// are on at all.
std::string ThpModes() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(mode, modes);
  return modes;
}
bool ThpOn(const std::string& modes) { return !modes.empty() && modes.find("[never]") == std::string::npos; }

int ThpEligible(std::uintptr_t address) { return static_cast<int>(SmapsField(address, "THPeligible")); }

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
  const std::string modes = ThpModes();
  if (!ThpOn(modes)) GTEST_SKIP() << "transparent huge pages are off on this machine ('" << modes << "')";
  std::vector<char> v;
  ReserveHuge(v, 16 << 20);
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t aligned = (begin + kHuge - 1) & ~(kHuge - 1);
  ASSERT_LT(aligned + kHuge, begin + v.capacity());
  const int eligible = ThpEligible(aligned);
  if (eligible < 0) GTEST_SKIP() << "this kernel's smaps has no THPeligible field";
  EXPECT_EQ(eligible, 1) << "huge pages were not asked for (modes: " << modes << ")";
}

// Growing a filled vector moves its elements into the new buffer after the advice, so that
// they are faulted in as huge pages too (a plain reserve would copy them in small pages first).
TEST(HugePages, ElementsMovedByAGrowthLandOnHugePages) {
  const std::string modes = ThpModes();
  if (!ThpOn(modes)) GTEST_SKIP() << "transparent huge pages are off on this machine ('" << modes << "')";
  // Whether the machine hands out huge pages at all now: an advised buffer written whole.
  std::vector<char> probe;
  AssignHuge(probe, size_t{16} << 20, char{1});
  if (SmapsField(reinterpret_cast<std::uintptr_t>(probe.data()) + kHuge, "AnonHugePages") <= 0) {
    GTEST_SKIP() << "no huge page was given to an advised buffer (none free, or smaps lacks AnonHugePages)";
  }
  std::vector<char> v(size_t{12} << 20, 3);  // filled without advice
  ReserveHuge(v, size_t{48} << 20);
  ASSERT_EQ(v.size(), size_t{12} << 20);
  ASSERT_EQ(std::count(v.begin(), v.end(), 3), static_cast<std::ptrdiff_t>(v.size()));
  // The new buffer holds only the moved elements so far: its huge pages came from them.
  EXPECT_GE(SmapsField(reinterpret_cast<std::uintptr_t>(v.data()) + kHuge, "AnonHugePages"), 4 * 1024)
      << "kB of huge pages under the grown vector";
}

}  // namespace
}  // namespace testbed
