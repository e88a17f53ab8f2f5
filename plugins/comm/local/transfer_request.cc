#include "transfer_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed::local {

TransferRequest::TransferRequest(std::shared_ptr<GroupState> group, std::shared_ptr<Transfer> transfer, bool is_send,
                                 Clock::time_point started)
    : group_(std::move(group)), transfer_(std::move(transfer)), is_send_(is_send), started_(started) {}

TransferRequest::~TransferRequest() {
  if (withdrawn_ || transfer_->done.done()) return;
  if (!group_->mailbox.Cancel(transfer_, is_send_)) transfer_->done.Wait();
}

std::string TransferRequest::Describe() const {
  const Transfer& t = *transfer_;
  const int peer = is_send_ ? t.destination : t.source;
  return absl::StrCat(is_send_ ? "send to" : "recv from", " rank ", peer, " (world rank ",
                      group_->world_ranks[static_cast<size_t>(peer)], "), tag ", t.tag, ", on group ",
                      group_->rendezvous.group_name());
}

absl::Status TransferRequest::Wait() {
  if (withdrawn_) return withdrawn_status_;
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(group_->timeout_s));
  const Clock::time_point deadline = std::max(started_, Clock::now()) + timeout;
  if (!transfer_->done.WaitUntil(deadline)) {
    if (group_->mailbox.Cancel(transfer_, is_send_)) {
      withdrawn_ = true;
      const int peer = is_send_ ? transfer_->destination : transfer_->source;
      withdrawn_status_ = absl::DeadlineExceededError(absl::StrCat(Describe(), ": rank ", peer, " did not post the matching ",
                                                                   is_send_ ? "receive" : "send", " within timeout_s = ",
                                                                   group_->timeout_s, " s"));
      return withdrawn_status_;
    }
    transfer_->done.Wait();  // matched just now: the copy is under way
  }
  return transfer_->done.status();
}

absl::StatusOr<bool> TransferRequest::Test() {
  if (withdrawn_) return withdrawn_status_;
  if (!transfer_->done.done()) return false;
  absl::Status status = transfer_->done.status();
  if (!status.ok()) return status;
  return true;
}

}  // namespace testbed::local
