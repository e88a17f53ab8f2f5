// This process's memory: how much a description the core is about to build (a cluster, a
// model graph) may take before it is refused with its estimate instead of running the process
// out of memory (the configured limit, or half of the memory free now and of the
// address-space limit, when one is set), and what is resident now and at the peak.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "testbed/kept_blocks.h"

namespace testbed {

// Resident memory now (from /proc/self/statm) and the peak so far, in MiB; 0 where unknown.
[[nodiscard]] inline double ResidentMiB() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long size = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1048576.0 : 0;
}
[[nodiscard]] inline double PeakResidentMiB() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

[[nodiscard]] inline double MemoryAllowanceBytes(double configured_bytes = 0) noexcept {
  if (configured_bytes > 0) return configured_bytes;
  // Free memory, and what this process keeps for reuse (testbed/kept_blocks.h).
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  double limit = pages > 0 && page > 0
                     ? 0.5 * (static_cast<double>(pages) * static_cast<double>(page) + static_cast<double>(KeptBlockBytes()))
                     : 0;
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const double cap = 0.5 * static_cast<double>(as.rlim_cur);
    limit = limit > 0 ? std::min(limit, cap) : cap;
  }
  return limit;
}

// ResourceExhausted naming `what` when `need_bytes` exceeds the allowance; OK otherwise.
[[nodiscard]] inline absl::Status CheckMemoryAllowance(const std::string& what, double need_bytes,
                                                       double configured_bytes, const std::string& advice) {
  const double limit = MemoryAllowanceBytes(configured_bytes);
  if (limit <= 0 || need_bytes <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " is too large for this machine: it needs about ", absl::StrFormat("%.3g", need_bytes / 1073741824.0),
      " GiB, and ", absl::StrFormat("%.3g", limit / 1073741824.0), " GiB are allowed (",
      configured_bytes > 0 ? "the configured limit" : "half the free memory or address space", "); ", advice));
}

}  // namespace testbed
