#include "hetero_mapping.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "layer_times.h"
#include "program_timing.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct KindTimes {
  LayerTimes items;
  std::vector<double> prefix;  // forward + backward, n + 1 entries
  double model_s = 0;
};

// Servers sorted by their kind's speed (the model's time on it), then by index; the devices in
// that order.
std::vector<DeviceId> FastFirst(const Cluster& cluster, const std::map<std::string, KindTimes>& kinds) {
  std::vector<std::tuple<double, int, int, DeviceId>> keyed;
  for (const Device& d : cluster.devices()) {
    keyed.emplace_back(kinds.at(cluster.spec_of(d.id).name).model_s, d.node, d.local_index, d.id);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<DeviceId> out;
  for (const auto& k : keyed) out.push_back(std::get<3>(k));
  return out;
}

// The NIC links a transfer crosses (those whose node is set and which leave or enter a node).
int SharedFlows(const Cluster& cluster, const std::vector<std::pair<DeviceId, DeviceId>>& flows,
                std::pair<DeviceId, DeviceId> flow) {
  int most = 1;
  for (LinkId l : cluster.Route(flow.first, flow.second)) {
    int n = 0;
    for (const auto& f : flows) {
      const std::vector<LinkId> r = cluster.Route(f.first, f.second);
      n += std::find(r.begin(), r.end(), l) != r.end() ? 1 : 0;
    }
    most = std::max(most, n);
  }
  return most;
}

}  // namespace

absl::StatusOr<HeteroMapping> MapHeterogeneous(const PlanningContext& ctx, int pp, int dp, int micro_batches,
                                               std::vector<HeteroMapping>* all) {
  const Cluster& cluster = ctx.cluster;
  if (pp * dp != cluster.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("autopipe_h: pp x dp = ", pp * dp, " but the cluster has ",
                                                   cluster.num_devices(), " devices (tensor parallelism is 1)"));
  }
  std::map<std::string, KindTimes> kinds;
  for (const DeviceSpec& spec : cluster.device_specs()) {
    if (kinds.count(spec.name)) continue;
    KindTimes k;
    TESTBED_ASSIGN_OR_RETURN(k.items, SubLayerTimes(ctx.model, ctx.device_model, spec, 1, ctx.train.micro_batch, false,
                                                    ctx.train.precision));
    k.prefix.assign(1, 0.0);
    for (size_t i = 0; i < k.items.fwd.size(); ++i) k.prefix.push_back(k.prefix.back() + k.items.fwd[i] + k.items.bwd[i]);
    k.model_s = k.prefix.back();
    kinds.emplace(spec.name, std::move(k));
  }
  const int n = static_cast<int>(kinds.begin()->second.items.fwd.size());
  if (pp > n) return absl::InvalidArgumentError(absl::StrCat("autopipe_h: ", pp, " stages for ", n, " sub-layers"));
  const std::vector<DeviceId> fast = FastFirst(cluster, kinds);
  std::vector<DeviceId> in_order(static_cast<size_t>(cluster.num_devices()));
  for (int i = 0; i < cluster.num_devices(); ++i) in_order[static_cast<size_t>(i)] = i;
  struct Order {
    std::string name;
    const std::vector<DeviceId>* devices;
    bool by_stage;
  };
  std::vector<HeteroMapping> weighed;
  for (const Order& o : {Order{"cluster", &in_order, true}, Order{"fast-first", &fast, true},
                         Order{"pipelines", &fast, false}}) {
    HeteroMapping m;
    m.name = o.name;
    m.device_map.resize(static_cast<size_t>(pp * dp));
    for (int s = 0; s < pp; ++s) {
      for (int d = 0; d < dp; ++d) {
        m.device_map[static_cast<size_t>(d * pp + s)] = (*o.devices)[static_cast<size_t>(o.by_stage ? s * dp + d : d * pp + s)];
      }
    }
    // Each stage on its slowest replica's kind.
    std::vector<const KindTimes*> stage_kind(static_cast<size_t>(pp));
    for (int s = 0; s < pp; ++s) {
      for (int d = 0; d < dp; ++d) {
        const KindTimes* k = &kinds.at(cluster.spec_of(m.device_map[static_cast<size_t>(d * pp + s)]).name);
        if (stage_kind[static_cast<size_t>(s)] == nullptr || k->model_s > stage_kind[static_cast<size_t>(s)]->model_s) {
          stage_kind[static_cast<size_t>(s)] = k;
        }
      }
    }
    const PartCost cost = [&](int s, int first, int end) {
      const auto& p = stage_kind[static_cast<size_t>(s)]->prefix;
      return p[static_cast<size_t>(end)] - p[static_cast<size_t>(first)];
    };
    double upper = 0;
    for (const auto& [name, k] : kinds) upper = std::max(upper, k.model_s);
    auto counts = MinMaxContiguousSplit(n, pp, cost, upper);
    if (!counts.has_value()) return absl::InternalError("autopipe_h: no split of the sub-layers");
    // Transfers: one micro-batch's activation over the slowest replica's path, slowed by the
    // boundary's flows that share a link with it (its NIC, say): per boundary and replica,
    // (latency, seconds per byte).
    std::vector<double> transfer(static_cast<size_t>(pp > 1 ? pp - 1 : 0), 0.0);
    std::vector<std::vector<std::pair<double, double>>> paths(transfer.size());
    for (int s = 0; s + 1 < pp; ++s) {
      std::vector<std::pair<DeviceId, DeviceId>> flows;
      for (int d = 0; d < dp; ++d) {
        flows.emplace_back(m.device_map[static_cast<size_t>(d * pp + s)], m.device_map[static_cast<size_t>(d * pp + s + 1)]);
      }
      for (const auto& fl : flows) {
        paths[static_cast<size_t>(s)].emplace_back(cluster.PathLatency(fl.first, fl.second),
                                                   SharedFlows(cluster, flows, fl) / cluster.PathBandwidth(fl.first, fl.second));
      }
    }
    const auto& begin = kinds.begin()->second.items.begin;
    auto score = [&](const std::vector<int>& c) -> absl::StatusOr<double> {
      int item = 0;
      std::vector<double> f(static_cast<size_t>(pp), 0.0), b(static_cast<size_t>(pp), 0.0);
      for (int s = 0; s < pp; ++s) {
        const LayerTimes& it = stage_kind[static_cast<size_t>(s)]->items;
        for (int k = 0; k < c[static_cast<size_t>(s)]; ++k, ++item) {
          f[static_cast<size_t>(s)] += it.fwd[static_cast<size_t>(item)];
          b[static_cast<size_t>(s)] += it.bwd[static_cast<size_t>(item)];
        }
        if (s + 1 < pp) {
          const int last_layer = begin[static_cast<size_t>(item)] - 1;
          const double bytes = static_cast<double>(ctx.model.layers[static_cast<size_t>(last_layer)].output_bytes_per_sample) *
                               static_cast<double>(ctx.train.micro_batch);
          double worst = 0;
          for (const auto& [latency, s_per_byte] : paths[static_cast<size_t>(s)]) {
            worst = std::max(worst, latency + s_per_byte * bytes);
          }
          transfer[static_cast<size_t>(s)] = worst;
        }
      }
      const PipelineProgram program = OneFOneBProgram(pp, micro_batches);
      const OpCost op = [&](int s, PipelineOp::Kind kind, double frac) {
        return frac * (kind == PipelineOp::Kind::kBackward ? b[static_cast<size_t>(s)] : f[static_cast<size_t>(s)]);
      };
      TESTBED_ASSIGN_OR_RETURN(ProgramTiming t, TimeProgram(program, op, transfer));
      return t.end_s;
    };
    TESTBED_ASSIGN_OR_RETURN(double best, score(*counts));
    m.candidates = 1;
    // AutoPipe's refinement, kept local: one item across one boundary while it helps.
    for (bool moved = true; moved;) {
      moved = false;
      for (int s = 0; s + 1 < pp && !moved; ++s) {
        for (int dir : {-1, 1}) {
          std::vector<int> next = *counts;
          next[static_cast<size_t>(s)] += dir;
          next[static_cast<size_t>(s + 1)] -= dir;
          if (next[static_cast<size_t>(s)] < 1 || next[static_cast<size_t>(s + 1)] < 1) continue;
          TESTBED_ASSIGN_OR_RETURN(double t, score(next));
          ++m.candidates;
          if (t < best * (1 - 1e-12)) {
            best = t;
            *counts = std::move(next);
            moved = true;
            break;
          }
        }
      }
    }
    // The gradient all-reduce of the largest stage after the last backward, its ring over the
    // slowest link of the ring, as the mapping places the replicas.
    double all_reduce = 0;
    if (dp > 1) {
      int item = 0;
      for (int s = 0; s < pp; ++s) {
        double params = 0;
        for (int k = 0; k < (*counts)[static_cast<size_t>(s)]; ++k, ++item) {
          for (int l = begin[static_cast<size_t>(item)]; l < begin[static_cast<size_t>(item + 1)]; ++l) {
            params += static_cast<double>(ctx.model.layers[static_cast<size_t>(l)].params);
          }
        }
        double bw = kInf;
        for (int d = 0; d < dp; ++d) {
          bw = std::min(bw, cluster.PathBandwidth(m.device_map[static_cast<size_t>(d * pp + s)],
                                                  m.device_map[static_cast<size_t>(((d + 1) % dp) * pp + s)]));
        }
        all_reduce = std::max(all_reduce, 2.0 * (dp - 1) / dp * params * BytesPerElement(StoragePrecision(ctx.train.precision)) / bw);
      }
    }
    m.predicted_s = best + all_reduce;
    m.stages = StagesFromCounts(kinds.begin()->second.items, *counts);
    weighed.push_back(std::move(m));
  }
  std::stable_sort(weighed.begin(), weighed.end(),
                   [](const HeteroMapping& a, const HeteroMapping& b) { return a.predicted_s < b.predicted_s; });
  HeteroMapping best = weighed.front();
  if (all != nullptr) *all = std::move(weighed);
  return best;
}

}  // namespace testbed::autopipe
