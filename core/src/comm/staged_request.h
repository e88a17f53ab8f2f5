// A host-staged operation in flight: the wrapped device request, the device blocks it uses
// (an input and an output block at most), and the copy back to host memory that finishes it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "comm/staging_pool.h"
#include "testbed/communicator.h"

namespace testbed::comm {

// The device-to-host copy made when the operation has finished (none when `bytes` is 0).
struct CopyOut {
  void* host = nullptr;
  const void* device = nullptr;
  std::size_t bytes = 0;
};

class StagedRequest final : public CommRequest {
 public:
  StagedRequest(std::string what, std::shared_ptr<StagingPool> pool, PooledBlock first, PooledBlock second,
                CopyOut copy, CommRequestPtr inner)
      : what_(std::move(what)),
        pool_(std::move(pool)),
        first_(std::move(first)),
        second_(std::move(second)),
        copy_(copy),
        inner_(std::move(inner)) {}

  [[nodiscard]] absl::Status Wait() override;
  [[nodiscard]] absl::StatusOr<bool> Test() override;

 private:
  // Copies the result out once; the status of the whole operation after that.
  [[nodiscard]] absl::Status Finish(absl::Status inner_status);

  std::string what_;
  std::shared_ptr<StagingPool> pool_;
  PooledBlock first_, second_;  // declared before inner_: released after it is destroyed
  CopyOut copy_;
  CommRequestPtr inner_;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace testbed::comm
