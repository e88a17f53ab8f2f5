// What the executor's own training loops (gnn, moe-gpt) share: the replicas' gradients summed
// over the ranks in one flat all-reduce, and one thread per rank this process hosts.
#pragma once

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "testbed/communicator.h"
#include "testbed/train/param.h"

namespace testbed::exec {

// Sums the gradients of `params` over `comm` (bitwise the same on every rank); `flat` is
// the reusable buffer.
[[nodiscard]] absl::Status SumGradients(CommGroup& comm, const std::vector<train::Param<float>*>& params,
                                        std::vector<float>& flat);

// results[e] = train(e) for every hosted rank e, rank 0 on this thread, the others each on one.
template <typename R, typename F>
void OnHostedRanks(std::vector<R>& results, F&& train) {
  std::vector<std::thread> threads;
  for (size_t e = 1; e < results.size(); ++e) threads.emplace_back([&, e] { results[e] = train(e); });
  if (!results.empty()) results[0] = train(0);
  for (std::thread& t : threads) t.join();
}

}  // namespace testbed::exec
