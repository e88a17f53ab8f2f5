#include "exec/replica_sync.h"

#include <cstring>

#include "testbed/status_macros.h"

namespace testbed::exec {

absl::Status SumGradients(CommGroup& comm, const std::vector<train::Param<float>*>& params, std::vector<float>& flat) {
  size_t n = 0;
  for (const train::Param<float>* p : params) n += static_cast<size_t>(p->grad.size());
  flat.resize(n);
  size_t at = 0;
  for (const train::Param<float>* p : params) {
    std::memcpy(flat.data() + at, p->grad.data(), static_cast<size_t>(p->grad.size()) * sizeof(float));
    at += static_cast<size_t>(p->grad.size());
  }
  TESTBED_ASSIGN_OR_RETURN(CommRequestPtr req, comm.IAllReduce(flat.data(), flat.data(), static_cast<std::int64_t>(n),
                                                               DataType::kFloat32, ReduceOp::kSum));
  TESTBED_RETURN_IF_ERROR(req->Wait());
  at = 0;
  for (train::Param<float>* p : params) {
    std::memcpy(p->grad.data(), flat.data() + at, static_cast<size_t>(p->grad.size()) * sizeof(float));
    at += static_cast<size_t>(p->grad.size());
  }
  return absl::OkStatus();
}

}  // namespace testbed::exec
