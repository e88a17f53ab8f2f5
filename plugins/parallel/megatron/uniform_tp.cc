#include "uniform_tp.h"

#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<TpAssignment> UniformTp::Assign(const RefineContext& ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelGraph& model = ctx.planning.model;
  const auto uniform = [&](int t) { return std::vector<int>(model.layers.size(), t); };
  TpAssignment a;
  if (degree_ > 0) {
    a.degrees = uniform(degree_);
    return a;
  }
  if (!ctx.planning.evaluate) {
    return absl::InvalidArgumentError("megatron.uniform_tp searches its degree with the simulator (backend \"sim\"); "
                                      "elsewhere set its parameter degree");
  }
  const auto devices = static_cast<int>(StageDevices(ctx.plan, 0).size());
  double best = std::numeric_limits<double>::infinity();
  int evaluated = 0;
  absl::Status last = absl::ResourceExhaustedError("no tensor-parallel degree was tried");
  for (int t = 1; t <= devices && devices % t == 0; t *= 2) {
    Plan candidate = ctx.plan;
    if (absl::Status st = ApplyTpDegrees(model, uniform(t), candidate); !st.ok()) {
      last = st;
      continue;
    }
    absl::StatusOr<MetricSet> m = ctx.planning.evaluate(candidate);
    ++evaluated;
    if (!m.ok()) {
      if (m.status().code() != absl::StatusCode::kResourceExhausted) return m.status();
      last = absl::Status(m.status().code(), absl::StrCat("degree ", t, ": ", m.status().message()));
      continue;
    }
    const Metric* time = m->Find("iteration_time_s");
    if (time != nullptr && time->value < best) {
      best = time->value;
      a.degrees = uniform(t);
    }
  }
  if (a.degrees.empty()) {
    return absl::Status(last.code(), absl::StrCat("megatron.uniform_tp: no uniform degree works; the last refusal: ",
                                                  last.message()));
  }
  a.metrics.Add("tp_planning_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "s",
                Better::kLower);
  a.metrics.Add("tp_candidates_evaluated", evaluated, "1");
  return a;
}

}  // namespace testbed::megatron
