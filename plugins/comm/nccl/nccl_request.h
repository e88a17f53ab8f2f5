// A started nccl operation: a CUDA event recorded on the rank's stream after it, polled
// (with NCCL's asynchronous error) until it completes or the deadline passes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "endpoint_core.h"
#include "testbed/communicator.h"

namespace testbed::nccl {

struct OpLabel {
  const char* name = "";
  std::int64_t seq = -1;  // collectives
  int peer = -1;          // send / recv
};

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(std::shared_ptr<EndpointCore> core, OpLabel label, cudaEvent_t done);
  ~NcclRequest() override;

  [[nodiscard]] absl::Status Wait() override;
  [[nodiscard]] absl::StatusOr<bool> Test() override;

 private:
  // Done (true), pending (false) or failed.
  [[nodiscard]] absl::StatusOr<bool> Poll();
  [[nodiscard]] std::string Describe() const;
  void Finish(absl::Status status);

  std::shared_ptr<EndpointCore> core_;
  OpLabel label_;
  cudaEvent_t done_;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace testbed::nccl
