#include "hph_partition.h"

#include <algorithm>
#include <limits>

#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::hph {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Prefix sums of one stage's slowest kind, and its memory.
struct StageSums {
  std::vector<double> fwd, bwd, params, act, ckpt;
  double capacity = 0, static_per_param = 0, in_flight = 1;
  [[nodiscard]] static double Range(const std::vector<double>& p, int first, int end) {
    return p[static_cast<size_t>(end)] - p[static_cast<size_t>(first)];
  }
  // Bytes without and with recomputation.
  [[nodiscard]] double Plain(int first, int end) const {
    return Range(params, first, end) * static_per_param + in_flight * Range(act, first, end);
  }
  [[nodiscard]] double Recomputed(int first, int end) const {
    // Checkpoints of the micro-batches in flight, and one micro-batch's activations rebuilt.
    return Range(params, first, end) * static_per_param + in_flight * Range(ckpt, first, end) + Range(act, first, end);
  }
};

}  // namespace

void TrafficOf(const std::vector<UnitProfile>& units, const std::vector<int>& counts, double grad_bytes_per_param,
               std::vector<double>& boundary_bytes, std::vector<double>& grad_bytes) {
  boundary_bytes.clear();
  grad_bytes.clear();
  int u = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    double params = 0;
    for (int k = 0; k < counts[s]; ++k, ++u) params += units[static_cast<size_t>(u)].params;
    grad_bytes.push_back(params * grad_bytes_per_param);
    if (s + 1 < counts.size()) boundary_bytes.push_back(units[static_cast<size_t>(u - 1)].output_bytes);
  }
}

absl::StatusOr<std::optional<Partition>> PartitionLayers(const PlanningContext& ctx, Profiles& profiles,
                                                        const Mapping& mapping, int m) {
  const int n = profiles.num_units(), pp = mapping.pp;
  if (pp > n) return std::optional<Partition>();
  std::vector<StageSums> stages;
  std::vector<const std::vector<UnitProfile>*> slowest(static_cast<size_t>(pp));
  double upper = 0;
  for (int s = 0; s < pp; ++s) {
    StageSums sums;
    double worst = -1;
    sums.capacity = kInf;
    for (int r = 0; r < mapping.dp; ++r) {
      const DeviceId d = mapping.At(s, r);
      TESTBED_ASSIGN_OR_RETURN(double t, profiles.ModelTime(d));
      if (t > worst) {
        worst = t;
        TESTBED_ASSIGN_OR_RETURN(slowest[static_cast<size_t>(s)], profiles.Of(d));
      }
      sums.capacity = std::min(sums.capacity, static_cast<double>(ctx.cluster.spec_of(d).memory_bytes));
    }
    sums.static_per_param =
        StaticBytes(1.0, ctx.train.precision, ctx.train.optimizer, ctx.parallel.zero_stage, mapping.dp).total();
    sums.in_flight = std::min<double>(m, pp - s);
    for (auto* v : {&sums.fwd, &sums.bwd, &sums.params, &sums.act, &sums.ckpt}) v->assign(1, 0.0);
    for (const UnitProfile& u : *slowest[static_cast<size_t>(s)]) {
      sums.fwd.push_back(sums.fwd.back() + u.fwd_s);
      sums.bwd.push_back(sums.bwd.back() + u.bwd_s);
      sums.params.push_back(sums.params.back() + u.params);
      sums.act.push_back(sums.act.back() + u.activation);
      sums.ckpt.push_back(sums.ckpt.back() + u.checkpoint);
    }
    upper = std::max(upper, m * (2 * sums.fwd.back() + sums.bwd.back()));
    stages.push_back(std::move(sums));
  }
  // A range's work per iteration: plain where it fits, recomputed where only that fits.
  const PartCost cost = [&](int s, int first, int end) {
    const StageSums& x = stages[static_cast<size_t>(s)];
    const double t = StageSums::Range(x.fwd, first, end) + StageSums::Range(x.bwd, first, end);
    if (x.Plain(first, end) <= x.capacity) return m * t;
    if (x.Recomputed(first, end) <= x.capacity) return m * (t + StageSums::Range(x.fwd, first, end));
    return kInf;
  };
  auto split = MinMaxContiguousSplit(n, pp, cost, upper);
  if (!split.has_value()) return std::optional<Partition>();
  Partition out;
  out.units = std::move(*split);
  // Per stage: its recomputation choice and time per micro-batch; then 1F1B with its slowest
  // stage setting the pace, and the communication.
  double sum = 0, slowest_t = 0;
  int first = 0;
  for (int s = 0; s < pp; ++s) {
    const StageSums& x = stages[static_cast<size_t>(s)];
    const int end = first + out.units[static_cast<size_t>(s)];
    const bool rc = x.Plain(first, end) > x.capacity;
    out.recompute.push_back(rc);
    const double t = StageSums::Range(x.fwd, first, end) * (rc ? 2 : 1) + StageSums::Range(x.bwd, first, end);
    sum += t;
    slowest_t = std::max(slowest_t, t);
    first = end;
  }
  std::vector<double> boundary_bytes, grad_bytes;
  TrafficOf(*slowest.front(), out.units, BytesPerElement(StoragePrecision(ctx.train.precision)), boundary_bytes,
            grad_bytes);
  const CommCost comm = CommTime(mapping, ctx.cluster, boundary_bytes, grad_bytes);
  out.comm_s = comm.PerIteration(m);
  // One micro-batch's transfers lie on the pipeline's fill; the gradient all-reduce after the
  // last backward is exposed.
  out.estimate_s = sum + (m - 1) * slowest_t + comm.per_micro_batch_s + comm.all_reduce_s;
  return std::optional<Partition>(std::move(out));
}

}  // namespace testbed::hph
