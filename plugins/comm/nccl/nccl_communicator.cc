#include "nccl_communicator.h"

#include <numeric>

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "cuda_device_memory.h"
#include "endpoint_core.h"
#include "nccl_group.h"
#include "testbed/host_staging.h"

namespace testbed::nccl {

absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> NcclCommunicator::Connect(int world_size) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    cudaGetLastError();  // a missing driver leaves a sticky error behind
    return absl::UnavailableError(absl::StrCat("nccl communicator: no usable GPU (",
                                               e != cudaSuccess ? cudaGetErrorString(e) : "no device", ")"));
  }
  if (world_size < 1 || world_size > devices) {
    return absl::InvalidArgumentError(absl::StrCat("nccl communicator: world_size ", world_size, " but this process sees ",
                                                   devices, " GPU(s); one rank per GPU"));
  }
  std::vector<int> ranks(static_cast<size_t>(world_size));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::vector<ncclComm_t> comms(static_cast<size_t>(world_size));
  const ncclResult_t r = ncclCommInitAll(comms.data(), world_size, ranks.data());
  if (r != ncclSuccess) {
    return absl::UnavailableError(absl::StrCat("nccl communicator: ncclCommInitAll: ", ncclGetErrorString(r)));
  }
  auto shared = std::make_shared<SharedGroup>(ranks, ranks);
  std::vector<std::unique_ptr<CommGroup>> endpoints;
  for (int k = 0; k < world_size; ++k) {
    auto group =
        std::make_unique<NcclGroup>(std::make_shared<EndpointCore>(shared, k, comms[static_cast<size_t>(k)], timeout_s_));
    if (host_buffers_) {
      endpoints.push_back(MakeHostStaged(std::move(group), std::make_shared<CudaDeviceMemory>(k)));
    } else {
      endpoints.push_back(std::move(group));
    }
  }
  return endpoints;
}

}  // namespace testbed::nccl
