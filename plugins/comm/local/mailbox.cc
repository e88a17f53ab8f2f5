#include "mailbox.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace testbed::local {

void Mailbox::Post(const std::shared_ptr<Transfer>& transfer, bool is_send) {
  std::shared_ptr<Transfer> other;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Queues& q = queues_[Key{transfer->source, transfer->destination, transfer->tag}];
    auto& waiting = is_send ? q.recvs : q.sends;
    if (waiting.empty()) {
      (is_send ? q.sends : q.recvs).push_back(transfer);
      return;
    }
    other = std::move(waiting.front());
    waiting.pop_front();
  }
  // Copy outside the lock: other pairs of the group keep matching meanwhile.
  if (is_send) {
    Deliver(*transfer, *other);
  } else {
    Deliver(*other, *transfer);
  }
}

void Mailbox::Deliver(Transfer& send, Transfer& recv) noexcept {
  absl::Status status;
  if (send.type != recv.type) {
    status = absl::InvalidArgumentError(absl::StrCat("send from rank ", send.source, " to rank ", send.destination,
                                                     " (tag ", send.tag, ") is ", DataTypeName(send.type),
                                                     " but the receive is ", DataTypeName(recv.type)));
  } else if (send.count > recv.count) {
    status = absl::InvalidArgumentError(absl::StrCat("send from rank ", send.source, " to rank ", send.destination,
                                                     " (tag ", send.tag, ") has ", send.count,
                                                     " elements but the receive only room for ", recv.count));
  } else if (send.count > 0) {
    std::memcpy(recv.recv, send.send, static_cast<size_t>(send.count) * DataTypeSize(send.type));
  }
  send.done.Finish(status);
  recv.done.Finish(status);
}

bool Mailbox::Cancel(const std::shared_ptr<Transfer>& transfer, bool is_send) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(Key{transfer->source, transfer->destination, transfer->tag});
  if (it == queues_.end()) return false;
  auto& posted = is_send ? it->second.sends : it->second.recvs;
  auto pos = std::find(posted.begin(), posted.end(), transfer);
  if (pos == posted.end()) return false;
  posted.erase(pos);
  return true;
}

}  // namespace testbed::local
