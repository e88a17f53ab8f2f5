#include "group_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mpi_runtime.h"

namespace testbed::mpi {

GroupCore::GroupCore(MPI_Comm comm, MPI_Comm control, std::vector<int> world_ranks, double timeout_s,
                     bool track_arrivals)
    : comm_(comm),
      control_(control),
      world_ranks_(std::move(world_ranks)),
      timeout_s_(timeout_s),
      name_(absl::StrCat("{", absl::StrJoin(world_ranks_, ", "), "}")),
      arrivals_(control, [comm] {
        int r = 0;
        MPI_Comm_rank(comm, &r);
        return r;
      }(), static_cast<int>(world_ranks_.size()), track_arrivals) {
  MPI_Comm_rank(comm_, &rank_);
}

GroupCore::~GroupCore() {
  if (!MpiUsable()) return;
  bool in_use = false;
  for (auto& [requests, buffers] : orphans_) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    in_use = in_use || !done;
  }
  // A communicator with an operation MPI still runs must not be freed; it is left to
  // MPI_Finalize (the job is failing anyway).
  if (in_use || arrivals_.HasPendingSends()) return;
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&control_);
}

std::string GroupCore::DescribeRanks(const std::vector<int>& ranks) const {
  std::vector<std::string> parts;
  for (int r : ranks) parts.push_back(absl::StrCat(r, " (world rank ", world_ranks_[static_cast<size_t>(r)], ")"));
  return absl::StrJoin(parts, ", ");
}

void GroupCore::Break(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok()) broken_ = why;
}

absl::Status GroupCore::CheckUsable() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("group ", name_, " is broken by an earlier error: ", broken_.message()));
}

absl::Status GroupCore::CollectiveTimedOut(const std::string& what, std::int64_t seq) {
  const std::string within = absl::StrCat(" within timeout_s = ", timeout_s_, " s");
  const std::vector<int> missing = arrivals_.Missing(seq, std::min(0.2, timeout_s_));
  std::string message;
  if (!missing.empty()) {
    message = absl::StrCat(what, ": rank(s) ", DescribeRanks(missing), " did not join", within);
  } else {
    // Everyone started it: a member that died inside it (or stopped waiting) sends no pulses.
    const double quiet = std::clamp(timeout_s_ / 2, 0.5, 2.0);
    const std::vector<int> silent = arrivals_.Silent(quiet);
    message = silent.empty()
                  ? absl::StrCat(what, ": every member started it but it did not finish", within)
                  : absl::StrCat(what, ": every member started it, then rank(s) ", DescribeRanks(silent),
                                 " fell silent (nothing from them for ", quiet,
                                 " s: dead, or no longer waiting on this group); it did not finish", within);
  }
  absl::Status error = absl::DeadlineExceededError(message);
  Break(error);
  return error;
}

void GroupCore::Register(Progressing* op) {
  std::lock_guard<std::mutex> lock(progressing_mu_);
  progressing_.push_back(op);
}

void GroupCore::Unregister(Progressing* op) {
  std::lock_guard<std::mutex> lock(progressing_mu_);
  progressing_.erase(std::remove(progressing_.begin(), progressing_.end(), op), progressing_.end());
}

void GroupCore::ProgressOthers(const Progressing* except) {
  std::vector<Progressing*> ops;
  {
    std::lock_guard<std::mutex> lock(progressing_mu_);
    // Called on every turn of a wait's polling loop: nothing to copy when the caller is alone.
    if (progressing_.size() <= 1) return;
    ops = progressing_;
  }
  // Outside the lock: an operation that finishes unregisters itself. A group's operations are
  // started and waited for by one thread, so none is destroyed meanwhile.
  for (Progressing* op : ops) {
    if (op != except) op->Progress();
  }
}

void GroupCore::Adopt(std::vector<MPI_Request> requests, std::shared_ptr<void> buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  orphans_.emplace_back(std::move(requests), std::move(buffers));
}

}  // namespace testbed::mpi
