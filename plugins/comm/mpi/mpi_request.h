// A started mpi operation: its MPI requests, the count arrays and staging buffers MPI uses
// until it finishes, and what to say when peers fail to show up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "group_core.h"
#include "testbed/communicator.h"

namespace testbed::mpi {

struct OpLabel {
  const char* name = "";   // "all_reduce", "send", ...
  std::int64_t seq = -1;   // collectives: number within the group
  int peer = -1;           // point-to-point: the other rank
  int tag = -1;
};

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(std::shared_ptr<GroupCore> core, OpLabel label, std::vector<MPI_Request> requests,
             std::shared_ptr<void> buffers);
  // Waits for an unfinished operation (bounded by the deadline).
  ~MpiRequest() override;

  [[nodiscard]] absl::Status Wait() override;
  [[nodiscard]] absl::StatusOr<bool> Test() override;

 private:
  [[nodiscard]] std::string Describe() const;
  // After the deadline: names the missing peers, cancels what can be cancelled and breaks
  // the group when an operation must be left running.
  [[nodiscard]] absl::Status TimedOut();
  void Finish(absl::Status status);

  std::shared_ptr<GroupCore> core_;
  OpLabel label_;
  std::vector<MPI_Request> requests_;
  std::shared_ptr<void> buffers_;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace testbed::mpi
