#include "hph_partition.h"

#include <algorithm>
#include <limits>
#include <map>

#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::hph {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Prefix sums of one stage's slowest kind, and its memory.
struct StageSums {
  std::vector<double> fwd, bwd, params, act, ckpt;
  double static_per_param = 0;
  [[nodiscard]] static double Range(const std::vector<double>& p, int first, int end) {
    return p[static_cast<size_t>(end)] - p[static_cast<size_t>(first)];
  }
  // Bytes without and with recomputation, `in_flight` micro-batches kept.
  [[nodiscard]] double Plain(int first, int end, double in_flight) const {
    return Range(params, first, end) * static_per_param + in_flight * Range(act, first, end);
  }
  [[nodiscard]] double Recomputed(int first, int end, double in_flight) const {
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
                                                        const Mapping& mapping, int total) {
  const int n = profiles.num_units(), pp = mapping.pp, dp = mapping.dp;
  if (pp > n || total < dp) return std::optional<Partition>();
  // Prefix sums per device kind, shared by the stages and replicas of that kind.
  std::map<const std::vector<UnitProfile>*, StageSums> by_kind;
  std::vector<std::vector<const StageSums*>> kind(static_cast<size_t>(pp));  // [stage][replica]
  std::vector<double> capacity(static_cast<size_t>(pp), kInf);
  const double static_per_param =
      StaticBytes(1.0, ctx.train.precision, ctx.train.optimizer, ctx.parallel.zero_stage, dp).total();
  double upper = 0;
  for (int s = 0; s < pp; ++s) {
    for (int r = 0; r < dp; ++r) {
      const DeviceId d = mapping.At(s, r);
      TESTBED_ASSIGN_OR_RETURN(const std::vector<UnitProfile>* units, profiles.Of(d));
      auto [it, fresh] = by_kind.try_emplace(units);
      if (fresh) {
        StageSums& x = it->second;
        for (auto* v : {&x.fwd, &x.bwd, &x.params, &x.act, &x.ckpt}) v->assign(1, 0.0);
        for (const UnitProfile& u : *units) {
          x.fwd.push_back(x.fwd.back() + u.fwd_s);
          x.bwd.push_back(x.bwd.back() + u.bwd_s);
          x.params.push_back(x.params.back() + u.params);
          x.act.push_back(x.act.back() + u.activation);
          x.ckpt.push_back(x.ckpt.back() + u.checkpoint);
        }
        x.static_per_param = static_per_param;
        upper = std::max(upper, static_cast<double>(total) * (2 * x.fwd.back() + x.bwd.back()));
      }
      kind[static_cast<size_t>(s)].push_back(&it->second);
      capacity[static_cast<size_t>(s)] =
          std::min(capacity[static_cast<size_t>(s)], static_cast<double>(ctx.cluster.spec_of(d).memory_bytes));
    }
  }
  // Whether a stage's range must recompute (nullopt: it does not fit even so), for `in_flight`.
  auto recomputes = [&](int s, int first, int end, double in_flight) -> std::optional<bool> {
    const StageSums& x = *kind[static_cast<size_t>(s)].front();  // parameters and bytes: kind-independent
    if (x.Plain(first, end, in_flight) <= capacity[static_cast<size_t>(s)]) return false;
    if (x.Recomputed(first, end, in_flight) <= capacity[static_cast<size_t>(s)]) return true;
    return std::nullopt;
  };
  auto time_of = [&](int s, int r, int first, int end, bool rc) {
    const StageSums& x = *kind[static_cast<size_t>(s)][static_cast<size_t>(r)];
    return StageSums::Range(x.fwd, first, end) * (rc ? 2 : 1) + StageSums::Range(x.bwd, first, end);
  };
  std::vector<int> m(static_cast<size_t>(dp), total / dp);
  for (int r = 0; r < total % dp; ++r) ++m[static_cast<size_t>(r)];
  Partition out;
  for (int pass = 0; pass < 2; ++pass) {
    const double most = *std::max_element(m.begin(), m.end());
    const PartCost cost = [&](int s, int first, int end) {
      const auto rc = recomputes(s, first, end, std::min<double>(most, pp - s));
      if (!rc.has_value()) return kInf;
      double worst = 0;
      for (int r = 0; r < dp; ++r) worst = std::max(worst, m[static_cast<size_t>(r)] * time_of(s, r, first, end, *rc));
      return worst;
    };
    auto split = MinMaxContiguousSplit(n, pp, cost, upper);
    if (!split.has_value()) return std::optional<Partition>();
    out.units = std::move(*split);
    out.recompute.clear();
    int first = 0;
    for (int s = 0; s < pp; ++s) {
      const int end = first + out.units[static_cast<size_t>(s)];
      out.recompute.push_back(*recomputes(s, first, end, std::min<double>(most, pp - s)));
      first = end;
    }
    // Each pipeline's pace: its slowest stage per micro-batch; micro-batches in proportion.
    std::vector<double> pace(static_cast<size_t>(dp), 0.0);
    for (int r = 0; r < dp; ++r) {
      int f = 0;
      for (int s = 0; s < pp; ++s) {
        const int e = f + out.units[static_cast<size_t>(s)];
        pace[static_cast<size_t>(r)] =
            std::max(pace[static_cast<size_t>(r)], time_of(s, r, f, e, out.recompute[static_cast<size_t>(s)]));
        f = e;
      }
    }
    if (pass == 1) break;
    double rate = 0;
    for (double p : pace) rate += 1 / p;
    int given = 0;
    for (int r = 0; r < dp; ++r) {
      m[static_cast<size_t>(r)] = std::max(1, static_cast<int>(total / pace[static_cast<size_t>(r)] / rate));
      given += m[static_cast<size_t>(r)];
    }
    // Hand out what rounding left to the fastest pipelines (or take it back from the slowest).
    std::vector<int> by_pace(static_cast<size_t>(dp));
    for (int r = 0; r < dp; ++r) by_pace[static_cast<size_t>(r)] = r;
    std::stable_sort(by_pace.begin(), by_pace.end(),
                     [&](int a, int b) { return pace[static_cast<size_t>(a)] < pace[static_cast<size_t>(b)]; });
    for (int i = 0; given < total; i = (i + 1) % dp, ++given) ++m[static_cast<size_t>(by_pace[static_cast<size_t>(i)])];
    for (int i = dp - 1; given > total; i = (i + dp - 1) % dp) {
      if (m[static_cast<size_t>(by_pace[static_cast<size_t>(i)])] > 1) {
        --m[static_cast<size_t>(by_pace[static_cast<size_t>(i)])];
        --given;
      }
    }
  }
  out.micro_batches = m;
  // The estimate: the slowest pipeline's 1F1B, plus one micro-batch's transfers and the
  // gradient all-reduce its buckets do not hide behind the last backward of their stage and
  // of the stages before it (the slowest replica's).
  double slowest_pipeline = 0;
  std::vector<double> last_backward(static_cast<size_t>(pp), 0.0);
  for (int r = 0; r < dp; ++r) {
    double sum = 0, worst = 0;
    int f = 0;
    for (int s = 0; s < pp; ++s) {
      const int e = f + out.units[static_cast<size_t>(s)];
      const double t = time_of(s, r, f, e, out.recompute[static_cast<size_t>(s)]);
      sum += t;
      worst = std::max(worst, t);
      const StageSums& x = *kind[static_cast<size_t>(s)][static_cast<size_t>(r)];
      last_backward[static_cast<size_t>(s)] =
          std::max(last_backward[static_cast<size_t>(s)], StageSums::Range(x.bwd, f, e));
      f = e;
    }
    slowest_pipeline = std::max(slowest_pipeline, sum + (m[static_cast<size_t>(r)] - 1) * worst);
  }
  TESTBED_ASSIGN_OR_RETURN(const std::vector<UnitProfile>* units, profiles.Of(mapping.At(0, 0)));
  std::vector<double> boundary_bytes, grad_bytes;
  TrafficOf(*units, out.units, BytesPerElement(StoragePrecision(ctx.train.precision)), boundary_bytes, grad_bytes);
  const CommCost comm = CommTime(mapping, ctx.cluster, boundary_bytes, grad_bytes);
  out.comm_s = comm.PerIteration(*std::max_element(m.begin(), m.end()));
  double exposed = 0, hiding = 0;
  for (size_t s = 0; s < comm.stage_all_reduce_s.size(); ++s) {
    hiding += last_backward[s];
    exposed = std::max(exposed, comm.stage_all_reduce_s[s] - hiding);
  }
  out.estimate_s = slowest_pipeline + comm.per_micro_batch_s + exposed;
  return std::optional<Partition>(std::move(out));
}

}  // namespace testbed::hph
