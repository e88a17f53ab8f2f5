// Runs a function on every rank's endpoint, each from its own thread, and joins them: how
// tests drive the thread ranks of one process.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "testbed/communicator.h"

namespace testbed::testing {

inline void OnEveryRank(std::vector<std::unique_ptr<CommGroup>>& ranks, const std::function<void(CommGroup&)>& fn) {
  std::vector<std::thread> threads;
  for (auto& r : ranks) threads.emplace_back([&fn, &r] { fn(*r); });
  for (auto& t : threads) t.join();
}

}  // namespace testbed::testing
