// The request of a local send or receive: finished by whichever side of the pair arrives
// second; withdrawn from the mailbox when its deadline passes unmatched.
#pragma once

#include <memory>
#include <string>

#include "group_state.h"
#include "testbed/communicator.h"

namespace testbed::local {

class TransferRequest final : public CommRequest {
 public:
  TransferRequest(std::shared_ptr<GroupState> group, std::shared_ptr<Transfer> transfer, bool is_send,
                  Clock::time_point started);
  // An unmatched transfer is withdrawn; a matched one is being copied and is waited for.
  ~TransferRequest() override;

  [[nodiscard]] absl::Status Wait() override;
  [[nodiscard]] absl::StatusOr<bool> Test() override;

 private:
  [[nodiscard]] std::string Describe() const;

  std::shared_ptr<GroupState> group_;
  std::shared_ptr<Transfer> transfer_;
  bool is_send_;
  Clock::time_point started_;
  bool withdrawn_ = false;
  absl::Status withdrawn_status_;
};

}  // namespace testbed::local
