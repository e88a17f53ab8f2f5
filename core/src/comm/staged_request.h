// A host-staged operation in flight: the wrapped device request, the device blocks it uses,
// and the copies back to host memory that finish it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/staging_pool.h"
#include "testbed/communicator.h"

namespace testbed::comm {

// One device-to-host copy made when the operation has finished.
struct CopyOut {
  void* host = nullptr;
  const void* device = nullptr;
  std::size_t bytes = 0;
};

class StagedRequest final : public CommRequest {
 public:
  StagedRequest(std::string what, std::shared_ptr<StagingPool> pool, std::vector<PooledBlock> blocks,
                std::vector<CopyOut> copies, CommRequestPtr inner)
      : what_(std::move(what)),
        pool_(std::move(pool)),
        blocks_(std::move(blocks)),
        copies_(std::move(copies)),
        inner_(std::move(inner)) {}

  [[nodiscard]] absl::Status Wait() override;
  [[nodiscard]] absl::StatusOr<bool> Test() override;

 private:
  // Copies the results out once; the status of the whole operation after that.
  [[nodiscard]] absl::Status Finish(absl::Status inner_status);

  std::string what_;
  std::shared_ptr<StagingPool> pool_;
  std::vector<PooledBlock> blocks_;  // declared before inner_: released after it is destroyed
  std::vector<CopyOut> copies_;
  CommRequestPtr inner_;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace testbed::comm
