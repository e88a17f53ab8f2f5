#include "engine/progress.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace testbed {

Progress::Progress(int total, int skipped, std::FILE* out)
    : total_(total), done_(skipped), to_run_(total - skipped), start_(std::chrono::steady_clock::now()), out_(out),
      tty_(out != nullptr && ::isatty(::fileno(out))) {}

std::string Progress::Clock(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%ld:%02ld", s / 60, s % 60);
}

void Progress::Draw(const std::string& event) {
  if (out_ == nullptr) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string eta = "--:--";
  if (ran_ > 0) eta = Clock(elapsed / ran_ * (to_run_ - ran_));
  std::string running;
  for (const auto& r : running_) absl::StrAppend(&running, running.empty() ? "" : " ", r);
  const std::string line =
      absl::StrFormat("[%d/%d] %s%s  elapsed %s  eta %s%s", done_, total_, event, running.empty() ? "" : " | running " + running,
                      Clock(elapsed), eta, failed_ ? absl::StrCat("  failed ", failed_) : "");
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", line.substr(0, 160).c_str());
  } else if (!event.empty()) {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::Started(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.insert(run_id);
  Draw(tty_ ? "" : absl::StrCat("started ", run_id));  // a log line says when each run began
}

void Progress::Finished(const std::string& run_id, bool ok, double wall_time_s) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(run_id);
  ++done_;
  ++ran_;
  if (!ok) ++failed_;
  Draw(absl::StrFormat("%s %s (%.2f s)", ok ? "done" : "FAILED", run_id, wall_time_s));
}

void Progress::Done() {
  std::lock_guard<std::mutex> lock(mu_);
  if (tty_ && out_ != nullptr) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
  }
}

}  // namespace testbed
