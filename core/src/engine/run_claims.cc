#include "engine/run_claims.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

std::filesystem::path ClaimsPath(const std::filesystem::path& output, const std::string& job) {
  return std::filesystem::path(output.string() + ".claims-" + job);
}

absl::Status Errno(const std::string& what, const std::filesystem::path& p) {
  return absl::UnavailableError(absl::StrCat(what, " ", p.string(), ": ", std::strerror(errno)));
}

}  // namespace

std::string RunClaims::JobId() {
  const char* ns = std::getenv("PMIX_NAMESPACE");
  if (ns == nullptr || *ns == '\0') return "";
  std::string id;
  for (const char* c = ns; *c; ++c) id += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return id;
}

absl::StatusOr<RunClaims> RunClaims::Create(const std::filesystem::path& output, const std::string& job) {
  const std::filesystem::path p = ClaimsPath(output, job);
  const std::filesystem::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "0 0 0\n";
    if (!out) return Errno("cannot write", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, p, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", p.string(), ": ", ec.message()));
  return RunClaims(p);
}

absl::StatusOr<RunClaims> RunClaims::Join(const std::filesystem::path& output, const std::string& job, double wait_s) {
  const std::filesystem::path p = ClaimsPath(output, job);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  std::error_code ec;
  while (!std::filesystem::exists(p, ec)) {
    if (std::chrono::steady_clock::now() > until) {
      return absl::DeadlineExceededError(absl::StrCat("the job's first process did not start sharing the runs within ",
                                                      wait_s, " s (no ", p.string(), ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return RunClaims(p);
}

template <typename F>
absl::Status RunClaims::Update(F update) const {
  const int fd = ::open(path_.c_str(), O_RDWR);
  if (fd < 0) return Errno("cannot open", path_);
  if (::flock(fd, LOCK_EX) != 0) {
    ::close(fd);
    return Errno("cannot lock", path_);
  }
  char buf[64] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  long long next = 0, done = 0, skipped = 0;
  absl::Status st = absl::OkStatus();
  if (n <= 0 || std::sscanf(buf, "%lld %lld %lld", &next, &done, &skipped) != 3) {
    st = absl::DataLossError(absl::StrCat(path_.string(), ": not a claims file (expected three counts)"));
  } else {
    update(next, done, skipped);
    const std::string text = absl::StrCat(next, " ", done, " ", skipped, "\n");
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      st = Errno("cannot write", path_);
    }
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return st;
}

absl::StatusOr<std::int64_t> RunClaims::Next() const {
  long long taken = -1;
  absl::Status st = Update([&](long long& next, long long&, long long&) { taken = next++; });
  if (!st.ok()) return st;
  return static_cast<std::int64_t>(taken);
}

absl::Status RunClaims::Done(int skipped) const {
  return Update([skipped](long long&, long long& done, long long& skips) {
    ++done;
    skips += skipped;
  });
}

absl::StatusOr<RunClaims::Tally> RunClaims::Count() const {
  Tally t;
  absl::Status st = Update([&](long long&, long long& done, long long& skips) {
    t.done = static_cast<int>(done);
    t.skipped = static_cast<int>(skips);
  });
  if (!st.ok()) return st;
  return t;
}

void RunClaims::Remove() const {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace testbed
