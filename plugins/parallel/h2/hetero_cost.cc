#include "hetero_cost.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::h2 {

int Layout::num_stages() const noexcept {
  int p = 0;
  for (const StageGroup& g : groups) p += g.stages;
  return p;
}

int Layout::GroupOf(int stage) const noexcept {
  for (size_t g = 0; g < groups.size(); ++g) {
    if (stage < groups[g].stages) return static_cast<int>(g);
    stage -= groups[g].stages;
  }
  return -1;
}

absl::StatusOr<CostModel> CostModel::Make(const PlanningContext& ctx, std::vector<ChipType> types) {
  if (ctx.train.global_batch <= 0 || ctx.train.global_batch % ctx.train.micro_batch != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[train] global_batch (", ctx.train.global_batch, ") must be a positive multiple of micro_batch (",
        ctx.train.micro_batch, "): H2's stage groups split the iteration's micro-batches over their own replicas"));
  }
  CostModel m(ctx, std::move(types));
  m.bounds_ = UnitBoundaries(ctx.model);
  m.micro_batches_ = ctx.train.global_batch / ctx.train.micro_batch;
  return m;
}

absl::StatusOr<const std::vector<UnitCost>*> CostModel::Units(int type, int tp) {
  auto key = std::make_pair(type, tp);
  if (auto it = units_.find(key); it != units_.end()) return &it->second;
  const ChipType& chip = types_[static_cast<size_t>(type)];
  const bool sp = ctx_.parallel.sequence_parallel && tp > 1;
  const RecomputeMode rc = ctx_.parallel.recompute;
  const std::int64_t mb = ctx_.train.micro_batch;
  // TP all-reduces run over the type's node (ring over its first tp devices).
  double tp_bw = std::numeric_limits<double>::infinity();
  for (int i = 0; i + 1 < tp && i + 1 < static_cast<int>(chip.devices.size()); ++i) {
    tp_bw = std::min(tp_bw, ctx_.cluster.PathBandwidth(chip.devices[static_cast<size_t>(i)],
                                                       chip.devices[static_cast<size_t>(i + 1)]));
  }
  std::vector<UnitCost> costs;
  for (size_t u = 0; u + 1 < bounds_.size(); ++u) {
    UnitCost c;
    for (int l = bounds_[u]; l < bounds_[u + 1]; ++l) {
      const Layer& layer = ctx_.model.layers[static_cast<size_t>(l)];
      LayerWork w{&layer, Phase::kForward, mb, tp, sp, ctx_.train.precision, 1.0, false};
      TESTBED_ASSIGN_OR_RETURN(double f, ctx_.device_model.LayerTime(w, chip.spec));
      w.phase = Phase::kBackward;
      w.selective_recompute = rc == RecomputeMode::kSelective;
      TESTBED_ASSIGN_OR_RETURN(double b, ctx_.device_model.LayerTime(w, chip.spec));
      double comm = 0;
      if (tp > 1) {
        const double bytes = static_cast<double>(layer.tp_fwd_allreduce_bytes_per_sample +
                                                 layer.tp_bwd_allreduce_bytes_per_sample) *
                             static_cast<double>(mb);
        comm = 2.0 * (tp - 1) / tp * bytes / tp_bw;
      }
      c.compute_s += f + b + comm + (rc == RecomputeMode::kFull ? f : 0.0);
      c.backward_s += b;
      c.params += static_cast<double>(layer.params) / tp;
      c.activation += rc == RecomputeMode::kFull
                          ? CheckpointBytes(layer, static_cast<double>(mb), tp, sp)
                          : ActivationBytes(layer, static_cast<double>(mb), tp, sp, rc == RecomputeMode::kSelective);
      c.output_bytes = static_cast<double>(layer.output_bytes_per_sample) * static_cast<double>(mb);
    }
    costs.push_back(c);
  }
  return &units_.emplace(key, std::move(costs)).first->second;
}

double CostModel::StaticBytesPerParam(int dp) const {
  return StaticBytes(1.0, ctx_.train.precision, ctx_.train.optimizer, ctx_.parallel.zero_stage, dp).total();
}

DeviceId CostModel::DeviceOf(const Layout& layout, int stage, int replica, int rank) const {
  const int g = layout.GroupOf(stage);
  int first = 0;
  for (int i = 0; i < g; ++i) first += layout.groups[static_cast<size_t>(i)].stages;
  // Stages of earlier groups of the same type (a type may run two groups) come first.
  int offset = 0;
  const StageGroup& grp = layout.groups[static_cast<size_t>(g)];
  for (int i = 0; i < g; ++i) {
    const StageGroup& o = layout.groups[static_cast<size_t>(i)];
    if (o.type == grp.type) offset += o.stages * o.tp * o.dp;
  }
  const int index = offset + (replica * grp.stages + (stage - first)) * grp.tp + rank;
  return types_[static_cast<size_t>(grp.type)].devices[static_cast<size_t>(index)];
}

double CostModel::BoundaryTime(const Layout& layout, int stage, double bytes) const {
  const DeviceId a = DeviceOf(layout, stage, 0, 0), b = DeviceOf(layout, stage + 1, 0, 0);
  const Cluster& c = ctx_.cluster;
  const double bw = c.PathBandwidth(a, b);
  double one_way = c.PathLatency(a, b) + (bw > 0 && bw < std::numeric_limits<double>::infinity() ? bytes / bw : 0.0);
  if (c.cross_vendor() == CrossVendorPath::kHostStaged && c.CrossesVendors(a, b)) {
    // Two PCIe crossings (device to host, host to device) and one host copy.
    for (auto [d, to_device] : {std::pair{a, false}, std::pair{b, true}}) {
      auto route = c.HostRoute(d, -1, to_device);
      if (!route.ok()) continue;
      double slowest = std::numeric_limits<double>::infinity(), lat = 0;
      for (LinkId l : *route) {
        slowest = std::min(slowest, c.links()[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
        lat += c.links()[static_cast<size_t>(l)].spec.latency_s;
      }
      if (!route->empty()) one_way += lat + bytes / slowest;
    }
    one_way += bytes / c.host_copy_bytes_per_s();
  }
  return 2 * one_way;  // the activation forward, its gradient back
}

absl::StatusOr<Estimate> CostModel::Evaluate(const Layout& layout) {
  Estimate e;
  const int p = layout.num_stages();
  if (static_cast<int>(layout.units.size()) != p) {
    return absl::InternalError(absl::StrCat("layout has ", p, " stages but ", layout.units.size(), " unit counts"));
  }
  // First pass: each stage's time per micro-batch, activation bytes and parameters; each
  // boundary's round trip.
  struct StageSum {
    double t = 0, bwd = 0, params = 0, act = 0, out = 0, m = 1;
    const StageGroup* group = nullptr;
  };
  std::vector<StageSum> st(static_cast<size_t>(p));
  int u = 0;
  for (int s = 0; s < p; ++s) {
    StageSum& x = st[static_cast<size_t>(s)];
    x.group = &layout.groups[static_cast<size_t>(layout.GroupOf(s))];
    TESTBED_ASSIGN_OR_RETURN(const std::vector<UnitCost>* units, Units(x.group->type, x.group->tp));
    x.m = static_cast<double>(micro_batches_) / x.group->dp;
    for (int k = 0; k < layout.units[static_cast<size_t>(s)]; ++k, ++u) {
      const UnitCost& c = (*units)[static_cast<size_t>(u)];
      x.t += c.compute_s;
      x.bwd += c.backward_s;
      x.params += c.params;
      x.act += c.activation;
      x.out = c.output_bytes;
    }
  }
  std::vector<double> round_trip(static_cast<size_t>(std::max(p - 1, 0)));
  for (int s = 0; s + 1 < p; ++s) {
    round_trip[static_cast<size_t>(s)] = BoundaryTime(layout, s, st[static_cast<size_t>(s)].out);
  }
  // 1F1B, stage by stage (f: forward, b: backward, t = f + b per micro-batch; h: one way of a
  // boundary): stage s starts after the forwards before it, runs k = min(P - s, m_s) warmup
  // forwards, waits for its first gradient (W_s: the forwards from it to the last stage, the
  // backwards back, two ways of every boundary between), then runs its remaining work without
  // a gap; its last backward's gradient still crosses the stages before it. Where a neighbour
  // is nearly as slow, every steady cycle also waits for one way of the boundary between them.
  // The iteration is the longest such span, plus the exposed data-parallel all-reduce.
  std::vector<double> hop(round_trip.size());
  for (size_t i = 0; i < hop.size(); ++i) hop[i] = round_trip[i] / 2;
  double span_max = 0, bwd_before = 0, exposed = 0, worst_margin = -std::numeric_limits<double>::infinity();
  double start = 0, finish = 0;  // forwards (and hops) before stage s; backwards (and hops) after it
  // tail[s]: what micro-batch 0 does after stage s's forward until its gradient is back at s.
  std::vector<double> tail(static_cast<size_t>(p) + 1, 0.0);
  for (int j = p - 2; j >= 0; --j) {
    tail[static_cast<size_t>(j)] = tail[static_cast<size_t>(j + 1)] + st[static_cast<size_t>(j + 1)].t +
                                   2 * hop[static_cast<size_t>(j)];
  }
  for (int s = 0; s < p; ++s) {
    const StageSum& x = st[static_cast<size_t>(s)];
    const StageGroup& g = *x.group;
    const double f = x.t - x.bwd;
    const double wait = f + tail[static_cast<size_t>(s)];  // W_s
    const double k = std::min(static_cast<double>(p - s), x.m);
    double extra = 0;
    for (int nb : {s - 1, s + 1}) {
      if (nb < 0 || nb >= p) continue;
      const double h = hop[static_cast<size_t>(std::min(s, nb))];
      extra = std::max(extra, h - std::max(0.0, x.t - st[static_cast<size_t>(nb)].t));
    }
    const double span = start + std::max(wait, k * f) + (x.m * x.t - k * f) + (x.m - 1) * std::max(0.0, extra) + finish;
    span_max = std::max(span_max, span);
    if (s + 1 < p) {
      start += f + hop[static_cast<size_t>(s)];
      finish += x.bwd + hop[static_cast<size_t>(s)];
    }
    // Data-parallel all-reduce of the stage's gradients (ring over its replicas' rank 0s):
    // its buckets start during the stage's last backward and the rest hides behind the
    // backward still to come on the stages before it.
    if (g.dp > 1) {
      const DeviceId a = DeviceOf(layout, s, 0, 0), b = DeviceOf(layout, s, g.dp - 1, 0);
      const double bw = ctx_.cluster.PathBandwidth(a, b);
      const double grad_bytes = x.params * BytesPerElement(StoragePrecision(ctx_.train.precision));
      const double ar = 2.0 * (g.dp - 1) / g.dp * grad_bytes / bw;
      exposed = std::max(exposed, ar - bwd_before - x.bwd);
    }
    bwd_before += x.bwd;
    const double in_flight = std::min(x.m, static_cast<double>(p - s));
    const double need = x.params * StaticBytesPerParam(g.dp) + in_flight * x.act;
    const double have = static_cast<double>(types_[static_cast<size_t>(g.type)].spec.memory_bytes);
    if (need - have > worst_margin) {
      worst_margin = need - have;
      e.worst_stage = s;
      e.worst_need_bytes = need;
      e.worst_have_bytes = have;
    }
  }
  e.fits = worst_margin <= 0;
  e.iteration_s = span_max + exposed;
  return e;
}

}  // namespace testbed::h2
