#include "exec/collective_latency.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace testbed::exec {

absl::StatusOr<double> MeasureAllReduceLatency(std::vector<std::unique_ptr<CommGroup>>& endpoints, int repeats) {
  if (endpoints.empty()) return absl::InvalidArgumentError("no endpoints to measure");
  if (endpoints[0]->size() <= 1) return 0.0;
  const int warmup = 3;
  std::vector<absl::Status> status(endpoints.size());
  std::vector<double> times;
  auto body = [&](size_t i) {
    CommGroup& g = *endpoints[i];
    float x = 1.0f;
    for (int r = 0; r < warmup + repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      if (absl::Status s = g.AllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kMax); !s.ok()) {
        status[i] = s;
        return;
      }
      if (i == 0 && r >= warmup) {
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < endpoints.size(); ++i) threads.emplace_back(body, i);
  body(0);
  for (auto& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

}  // namespace testbed::exec
