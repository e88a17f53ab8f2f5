#include "testbed/plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace testbed {

const char* RecomputeName(RecomputeMode mode) noexcept {
  switch (mode) {
    case RecomputeMode::kNone: return "none";
    case RecomputeMode::kFull: return "full";
    case RecomputeMode::kSelective: return "selective";
  }
  return "?";
}

std::vector<StageSpec> Plan::Chunks() const {
  std::vector<StageSpec> out;
  const int p = pp(), v = virtual_stages();
  out.reserve(static_cast<size_t>(p * v));
  for (int c = 0; c < v; ++c) {
    for (int s = 0; s < p; ++s) out.push_back(Chunk(s, c));
  }
  return out;
}

void Plan::SetChunks(const std::vector<StageSpec>& chunks) {
  const int p = pp();
  if (p == 0) return;
  const int v = static_cast<int>(chunks.size()) / p;
  for (int s = 0; s < p; ++s) {
    auto& list = stages[static_cast<size_t>(s)].chunks;
    list.resize(static_cast<size_t>(v));
    for (int c = 0; c < v; ++c) list[static_cast<size_t>(c)] = chunks[static_cast<size_t>(c * p + s)];
  }
}

std::int64_t Plan::TotalMicroBatches() const {
  if (stages.empty()) return 0;
  std::int64_t total = 0;
  for (const StageReplica& r : stages.front().replicas) total += r.micro_batches;
  return total / std::max(1, context.degree);
}

std::vector<DeviceId> Plan::Devices() const {
  std::vector<DeviceId> out;
  for (const Stage& st : stages) {
    for (const StageReplica& r : st.replicas) out.insert(out.end(), r.devices.begin(), r.devices.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int Plan::num_devices() const {
  int n = 0;
  for (const Stage& st : stages) {
    for (const StageReplica& r : st.replicas) n += static_cast<int>(r.devices.size());
  }
  return n;
}

int Plan::StageOfLayer(int layer) const {
  for (int s = 0; s < pp(); ++s) {
    for (const StageSpec& c : stages[static_cast<size_t>(s)].chunks) {
      if (layer >= c.first_layer && layer < c.end_layer) return s;
    }
  }
  return -1;
}

int Plan::LayerTp(int layer) const {
  if (static_cast<size_t>(layer) < layers.size() && layers[static_cast<size_t>(layer)].tp > 0) {
    return layers[static_cast<size_t>(layer)].tp;
  }
  const int s = StageOfLayer(layer);
  return s < 0 ? 1 : tp(s);
}

LayerPrecision Plan::LayerBits(int layer) const {
  if (static_cast<size_t>(layer) < layers.size()) return layers[static_cast<size_t>(layer)].precision;
  return {};
}

ExpertPlacement Plan::PlacementOf(int layer, std::int64_t num_experts) const {
  if (auto it = experts.placement.find(layer); it != experts.placement.end()) return it->second;
  ExpertPlacement p;
  const int degree = std::max(1, experts.degree);
  for (std::int64_t e = 0; e < num_experts; ++e) p.owner.push_back(static_cast<int>(e % degree));
  p.replicas.assign(static_cast<size_t>(num_experts), {});
  return p;
}

std::optional<Plan::Grid> Plan::Uniform() const {
  if (stages.empty() || stages.front().replicas.empty()) return std::nullopt;
  Grid g;
  g.tp = stages.front().tp;
  g.pp = pp();
  g.dp = stages.front().dp();
  g.micro_batches = stages.front().replicas.front().micro_batches;
  for (const Stage& st : stages) {
    if (st.tp != g.tp || st.dp() != g.dp) return std::nullopt;
    for (const StageReplica& r : st.replicas) {
      if (r.micro_batches != g.micro_batches) return std::nullopt;
    }
  }
  return g;
}

absl::Status Plan::Validate(int num_layers, const Cluster& cluster) const {
  if (stages.empty()) return absl::InvalidArgumentError("plan has no stages");
  if (micro_batch < 1) return absl::InvalidArgumentError(absl::StrCat("plan has micro-batch size ", micro_batch, "; it must be >= 1"));
  const int p = pp(), v = virtual_stages();
  if (v < 1) return absl::InvalidArgumentError("stage 0 has no model chunk");
  std::set<DeviceId> seen;
  std::int64_t total = -1;
  for (int s = 0; s < p; ++s) {
    const Stage& st = stages[static_cast<size_t>(s)];
    const std::string where = absl::StrCat("stage ", s);
    if (static_cast<int>(st.chunks.size()) != v) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has ", st.chunks.size(), " model chunks; stage 0 has ", v));
    }
    if (st.tp < 1) return absl::InvalidArgumentError(absl::StrCat(where, ": tensor-parallel degree ", st.tp, " must be >= 1"));
    if (st.replicas.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has no data-parallel replica"));
    std::int64_t mbs = 0;
    for (size_t r = 0; r < st.replicas.size(); ++r) {
      const StageReplica& rep = st.replicas[r];
      if (static_cast<int>(rep.devices.size()) != st.tp) {
        return absl::InvalidArgumentError(absl::StrCat(where, ", replica ", r, " has ", rep.devices.size(),
                                                       " devices for tensor-parallel degree ", st.tp));
      }
      if (rep.micro_batches < 1) {
        return absl::InvalidArgumentError(absl::StrCat(where, ", replica ", r, " runs ", rep.micro_batches,
                                                       " micro-batches; at least 1 expected"));
      }
      mbs += rep.micro_batches;
      for (DeviceId d : rep.devices) {
        if (d < 0 || d >= cluster.num_devices()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ", replica ", r, " names device ", d, ", outside cluster '",
                                                         cluster.name(), "' of ", cluster.num_devices(), " devices"));
        }
        if (!seen.insert(d).second) {
          return absl::InvalidArgumentError(absl::StrCat("device ", d, " is used twice (again by ", where, ", replica ", r, ")"));
        }
        if (!st.device_type.empty() && cluster.spec_of(d).name != st.device_type) {
          return absl::InvalidArgumentError(absl::StrCat(where, " is for '", st.device_type, "' devices, but device ", d,
                                                         " is a '", cluster.spec_of(d).name, "'"));
        }
      }
    }
    if (total >= 0 && mbs != total) {
      return absl::InvalidArgumentError(absl::StrCat(where, " runs ", mbs, " micro-batches per iteration over its replicas; stage 0 runs ",
                                                     total));
    }
    total = mbs;
  }
  // Chunks cover the layers in global chunk order.
  int next = 0;
  const std::vector<StageSpec> all = Chunks();
  for (size_t i = 0; i < all.size(); ++i) {
    const StageSpec& st = all[i];
    if (st.first_layer != next || st.end_layer <= st.first_layer) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", i % static_cast<size_t>(p), ", chunk ", i / static_cast<size_t>(p),
                                                     " covers layers [", st.first_layer, ", ", st.end_layer,
                                                     "); expected a non-empty range starting at ", next));
    }
    if (st.recompute_layers < 0 || st.recompute_layers > st.end_layer - st.first_layer) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", i % static_cast<size_t>(p), ", chunk ", i / static_cast<size_t>(p),
                                                     " recomputes ", st.recompute_layers, " of its ",
                                                     st.end_layer - st.first_layer, " layers"));
    }
    next = st.end_layer;
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("stages cover ", next, " of the model's ", num_layers, " layers"));
  }
  if (!layers.empty()) {
    if (layers.size() != static_cast<size_t>(num_layers)) {
      return absl::InvalidArgumentError(absl::StrCat("per-layer settings given for ", layers.size(), " of ", num_layers, " layers"));
    }
    for (int l = 0; l < num_layers; ++l) {
      const LayerSetting& ls = layers[static_cast<size_t>(l)];
      const int stage_tp = tp(StageOfLayer(l));
      if (ls.tp < 0 || (ls.tp > 0 && stage_tp % ls.tp != 0)) {
        return absl::InvalidArgumentError(absl::StrCat("layer ", l, ": tensor-parallel degree ", ls.tp,
                                                       " does not divide its stage's ", stage_tp, " devices"));
      }
      for (int bits : {ls.precision.weight_bits, ls.precision.activation_bits, ls.precision.gradient_bits}) {
        if (!SupportedLayerBits(bits)) {
          return absl::InvalidArgumentError(absl::StrCat("layer ", l, ": ", bits, " bits; expected 0 (the run's), 2 to 8, 16 or 32"));
        }
      }
    }
  }
  if (!param_links.empty()) {
    if (zero_stage < 3) {
      return absl::InvalidArgumentError(absl::StrCat("a split of the weights over link classes needs zero_stage = 3, not ",
                                                     zero_stage));
    }
    if (param_links.classes.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat("weights split over ", param_links.classes.size(),
                                                     " link classes; at most 2 are supported"));
    }
    if (param_links.shares.size() != static_cast<size_t>(num_layers)) {
      return absl::InvalidArgumentError(absl::StrCat("link-class shares given for ", param_links.shares.size(), " of ",
                                                     num_layers, " layers"));
    }
    for (int l = 0; l < num_layers; ++l) {
      const std::vector<double>& row = param_links.shares[static_cast<size_t>(l)];
      double sum = 0;
      bool bad = row.size() != param_links.classes.size();
      for (double x : row) {
        bad = bad || !(x >= 0 && x <= 1);
        sum += x;
      }
      if (bad || std::abs(sum - 1) > 1e-9) {
        return absl::InvalidArgumentError(absl::StrCat("layer ", l, ": link-class shares must be one per class in [0, 1] "
                                                       "summing to 1"));
      }
    }
  }
  const int cpd = context.degree;
  if (cpd < 1) return absl::InvalidArgumentError(absl::StrCat("context-parallel degree ", cpd, " must be >= 1"));
  for (int s = 0; s < p && cpd > 1; ++s) {
    const Stage& st = stages[static_cast<size_t>(s)];
    if (dp(s) % cpd != 0) {
      return absl::InvalidArgumentError(absl::StrCat("context-parallel degree ", cpd, " does not divide stage ", s, "'s ",
                                                     dp(s), " replicas"));
    }
    for (int r = 0; r < dp(s); ++r) {
      const int lead = r - r % cpd;
      if (st.replicas[static_cast<size_t>(r)].micro_batches != st.replicas[static_cast<size_t>(lead)].micro_batches) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": replicas ", lead, " and ", r, " of one "
                                                       "context-parallel group run different numbers of micro-batches"));
      }
    }
  }
  const int ep = experts.degree;
  if (ep < 1) return absl::InvalidArgumentError(absl::StrCat("expert-parallel degree ", ep, " must be >= 1"));
  for (int s = 0; s < p && ep > 1; ++s) {
    if (dp(s) % ep != 0) {
      return absl::InvalidArgumentError(absl::StrCat("expert-parallel degree ", ep, " does not divide stage ", s, "'s ",
                                                     dp(s), " data-parallel replicas"));
    }
  }
  if (experts.exchange_steps < 1 || (ep > 1 && ep % experts.exchange_steps != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("expert exchange in ", experts.exchange_steps, " steps: expected a "
                                                   "divisor of the expert-parallel degree ", ep));
  }
  for (const auto& [layer, pl] : experts.placement) {
    if (layer < 0 || layer >= num_layers) return absl::InvalidArgumentError(absl::StrCat("expert placement for layer ", layer, ", outside the model"));
    if (pl.replicas.size() != pl.owner.size()) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ": expert placement lists ", pl.owner.size(), " owners and ",
                                                     pl.replicas.size(), " replica lists"));
    }
    for (size_t e = 0; e < pl.owner.size(); ++e) {
      auto bad = [&](int rank) { return rank < 0 || rank >= ep; };
      if (bad(pl.owner[e])) {
        return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ", expert ", e, ": owner rank ", pl.owner[e],
                                                       " outside the expert-parallel group of ", ep));
      }
      for (int r : pl.replicas[e]) {
        if (bad(r) || r == pl.owner[e]) {
          return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ", expert ", e, ": replica rank ", r,
                                                         " is outside the group of ", ep, " or its owner"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::int64_t> MicroBatchesPerReplica(const TrainSettings& train, int dp) {
  if (train.micro_batch < 1 || dp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batch size ", train.micro_batch, " and dp ", dp,
                                                   " must be >= 1"));
  }
  if (train.global_batch <= 0) return std::max<std::int64_t>(1, train.micro_batches);
  const std::int64_t per_step = train.micro_batch * dp;
  if (train.global_batch % per_step != 0) {
    return absl::InvalidArgumentError(absl::StrCat("global batch ", train.global_batch,
                                                   " is not a multiple of micro-batch size x dp = ",
                                                   train.micro_batch, " x ", dp));
  }
  return train.global_batch / per_step;
}

std::vector<DeviceId> DefaultDeviceMap(int tp, int pp, int dp) {
  std::vector<DeviceId> map(static_cast<size_t>(tp) * pp * dp);
  for (int d = 0; d < dp; ++d) {
    for (int s = 0; s < pp; ++s) {
      for (int t = 0; t < tp; ++t) {
        map[static_cast<size_t>((d * pp + s) * tp + t)] = static_cast<DeviceId>((s * dp + d) * tp + t);
      }
    }
  }
  return map;
}

std::vector<StageSpec> UniformStages(int num_layers, int parts) {
  std::vector<StageSpec> out;
  if (parts <= 0) return out;
  const int base = num_layers / parts;
  const int extra = num_layers % parts;
  int next = 0;
  for (int i = 0; i < parts; ++i) {
    const int n = base + (i < extra ? 1 : 0);
    out.push_back(StageSpec{next, next + n, 0});
    next += n;
  }
  return out;
}

Plan GridPlan(const GridSpec& g) {
  Plan plan;
  plan.micro_batch = g.micro_batch;
  plan.recompute = g.recompute;
  plan.sequence_parallel = g.sequence_parallel;
  plan.zero_stage = g.zero_stage;
  const std::vector<DeviceId> map = g.device_map.empty() ? DefaultDeviceMap(g.tp, g.pp, g.dp) : g.device_map;
  plan.stages.resize(static_cast<size_t>(std::max(0, g.pp)));
  for (int s = 0; s < g.pp; ++s) {
    Stage& st = plan.stages[static_cast<size_t>(s)];
    st.tp = g.tp;
    for (int c = 0; c < g.virtual_stages; ++c) {
      const size_t i = static_cast<size_t>(c * g.pp + s);
      st.chunks.push_back(i < g.chunks.size() ? g.chunks[i] : StageSpec{});
    }
    for (int d = 0; d < g.dp; ++d) {
      StageReplica r;
      r.micro_batches = g.micro_batches;
      for (int t = 0; t < g.tp; ++t) {
        const size_t i = static_cast<size_t>((d * g.pp + s) * g.tp + t);
        r.devices.push_back(i < map.size() ? map[i] : -1);
      }
      st.replicas.push_back(std::move(r));
    }
  }
  return plan;
}

}  // namespace testbed
