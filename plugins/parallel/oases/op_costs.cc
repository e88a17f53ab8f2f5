#include "op_costs.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"
#include "testbed/tp_planner.h"

namespace testbed::oases {
namespace {

// Parameter bytes of one op at degree t as the public planner counts them (fp32): attention
// 4h^2/t + 6h, MLP 2h*ffn/t + ffn + 3h (its 8h^2/t + 7h at ffn = 4h).
double ParamBytes(const Layer& l, int t) {
  const double h = static_cast<double>(l.hidden);
  if (l.kind == LayerKind::kAttention) return 4.0 * (4.0 * h * h / t + 6.0 * h);
  const double f = static_cast<double>(l.ffn_hidden > 0 ? l.ffn_hidden : 4 * l.hidden);
  return 4.0 * (2.0 * h * f / t + f + 3.0 * h);
}

}  // namespace

double RingAllReduceSeconds(const Cluster& cluster, const std::vector<DeviceId>& group, double bytes) {
  const size_t n = group.size();
  if (n < 2 || bytes <= 0) return 0.0;
  std::map<LinkId, double> load;
  double latency = 0;
  for (size_t k = 0; k < n; ++k) {
    const DeviceId a = group[k], b = group[(k + 1) % n];
    double hop = 0;
    for (LinkId l : cluster.Route(a, b)) {
      load[l] += bytes / static_cast<double>(n);
      hop += cluster.links()[static_cast<size_t>(l)].spec.latency_s;
    }
    latency = std::max(latency, hop);
  }
  double step = 0;
  for (const auto& [l, b] : load) step = std::max(step, b / cluster.links()[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
  return 2.0 * static_cast<double>(n - 1) * (step + latency);
}

absl::StatusOr<OpCosts> MeasureOps(const PlanningContext& ctx, const Plan& plan, const CostSettings& s) {
  OpCosts c;
  const ModelGraph& model = ctx.model;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const Layer& layer = model.layers[l];
    if (layer.kind == LayerKind::kAttention || layer.kind == LayerKind::kMlp) {
      const LayerKind want = c.ops.size() % 2 == 0 ? LayerKind::kAttention : LayerKind::kMlp;
      if (layer.kind != want) {
        return absl::InvalidArgumentError(absl::StrCat("oases plans a chain of attention and MLP ops in turn; layer '",
                                                       layer.name, "' breaks it"));
      }
      c.ops.push_back(static_cast<int>(l));
    } else if (layer.kind != LayerKind::kEmbedding && layer.kind != LayerKind::kHead) {
      return absl::InvalidArgumentError(absl::StrCat("oases plans transformer blocks; layer '", layer.name, "' is of kind ",
                                                     LayerKindName(layer.kind)));
    }
  }
  if (c.ops.size() < 2) return absl::InvalidArgumentError("oases needs at least one transformer block");
  const std::vector<DeviceId> devices = StageDevices(plan, 0);
  const auto N = static_cast<int>(devices.size());
  const double share = SamplesPerDevice(plan, 0);
  std::string why;
  for (int t = 1; t <= N; t *= 2) {
    if (N % t != 0) break;
    absl::Status fit = absl::OkStatus();
    for (int op : c.ops) {
      fit = CheckLayerDegree(model.layers[static_cast<size_t>(op)], t);
      if (!fit.ok()) break;
    }
    if (!fit.ok()) {
      why = std::string(fit.message());
      continue;
    }
    if (share * t <= 1.0) {
      why = absl::StrCat("degree ", t, " leaves ", share * t, " samples per group (the planner needs more than 1)");
      continue;
    }
    c.degrees.push_back(t);
    c.group_batch.push_back(share * t);
  }
  if (c.degrees.empty()) return absl::InvalidArgumentError(absl::StrCat("oases: no tensor-parallel degree is left: ", why));
  const DeviceSpec& dev = ctx.cluster.spec_of(devices.front());
  c.budget = s.memory_fraction * static_cast<double>(dev.memory_bytes);
  const size_t S = c.degrees.size();
  for (auto* table : {&c.fwd, &c.bwd, &c.comm, &c.memory}) table->assign(c.ops.size(), std::vector<double>(S, 0.0));
  c.runtime_memory.assign(S, 0.0);
  const double part = s.overlap ? 0.5 : 1.0;
  for (size_t j = 0; j < S; ++j) {
    const int t = c.degrees[j];
    const double b = c.group_batch[j];
    const auto batch = static_cast<std::int64_t>(b);
    const std::vector<DeviceId> group(devices.begin(), devices.begin() + t);
    for (size_t i = 0; i < c.ops.size(); ++i) {
      const Layer& layer = model.layers[static_cast<size_t>(c.ops[i])];
      for (auto [phase, out] : {std::pair{Phase::kForward, &c.fwd}, std::pair{Phase::kBackward, &c.bwd}}) {
        LayerWork w{&layer, phase, batch, t, false, ctx.train.precision, part * b / static_cast<double>(batch)};
        auto time = ctx.device_model.LayerTime(w, dev);
        if (!time.ok()) {
          return absl::Status(time.status().code(), absl::StrCat("oases: op '", layer.name, "' at degree ", t, ": ",
                                                                 time.status().message()));
        }
        (*out)[i][j] = *time;
      }
      const double bytes = static_cast<double>(layer.tp_fwd_allreduce_bytes_per_sample) * b * part;
      c.comm[i][j] = RingAllReduceSeconds(ctx.cluster, group, bytes);
      c.memory[i][j] = 12.0 * b * static_cast<double>(layer.seq_len) * static_cast<double>(layer.hidden) +
                       5.0 * ParamBytes(layer, t);
    }
    // What the public planner's profiled "runtime memory" holds besides the ops: here the
    // embedding and head (their weights, gradients and Adam states as for the ops, and the
    // head's logits for the group batch, split over the group).
    for (const Layer& layer : model.layers) {
      if (layer.kind != LayerKind::kEmbedding && layer.kind != LayerKind::kHead) continue;
      c.runtime_memory[j] += 5.0 * 4.0 * static_cast<double>(layer.params) / t +
                             b * static_cast<double>(layer.activation_bytes_per_sample) / t;
    }
  }
  return c;
}

ChainProblem BuildProblem(const OpCosts& c, bool overlap) {
  ChainProblem p;
  p.ops = static_cast<int>(c.ops.size());
  p.choices = static_cast<int>(c.degrees.size());
  p.budget = c.budget;
  const auto n = static_cast<size_t>(p.ops), S = static_cast<size_t>(p.choices);
  p.node.assign(n, std::vector<double>(S, 0.0));
  p.edge.assign(n - 1, std::vector<double>(S * S, 0.0));
  p.memory = c.memory;
  const auto& F = c.fwd;
  const auto& B = c.bwd;
  const auto& C = c.comm;
  for (size_t j = 0; j < S; ++j) {
    p.memory[n - 1][j] += c.runtime_memory[j];
    if (!overlap) {
      // Alpa-style: compute then communication, forward and backward (with the recomputation).
      for (size_t i = 0; i < n; ++i) p.node[i][j] = F[i][j] + C[i][j] + B[i][j] + F[i][j] + C[i][j];
      continue;
    }
    // The public planner's terms: op 0 forward and backward alone; op i (0 < i < n-1) hides
    // one sub-batch's all-reduce under the other's compute of op i and of op i+1; the last op
    // reads the terms of op n-2 (the code's lp_overhead_1[-1], lp_bp_1[-1]) and adds its own
    // all-reduce, forward and backward.
    p.node[0][j] = F[0][j] + B[0][j];
    for (size_t i = 1; i + 1 < n; ++i) {
      p.node[i][j] = std::max(F[i][j], C[i][j]) + std::max(F[i + 1][j], C[i][j]) +
                     std::max(B[i][j] + F[i][j], C[i][j]) + std::max(B[i + 1][j] + F[i + 1][j], C[i][j]);
    }
    if (n >= 2) {
      const size_t k = n - 2, last = n - 1;
      p.node[last][j] = std::max(F[k][j], C[k][j]) + C[last][j] + std::max(B[k][j] + F[k][j], C[k][j]) + C[last][j];
    }
  }
  for (size_t e = 0; e + 1 < n; ++e) {
    for (size_t a = 0; a < S; ++a) {
      for (size_t b = 0; b < S; ++b) {
        if (a == b) continue;
        double cost = 0;
        if (a < b) {  // the degree grows: an all-gather forward
          cost = static_cast<double>(c.degrees[b] / c.degrees[a]) * C[e][a];
          if (overlap) cost += std::min(C[e][a], F[e + 1][b]);
        } else {  // it shrinks: an all-gather of the gradients backward
          cost = static_cast<double>(c.degrees[a] / c.degrees[b]) * C[e + 1][b];
          if (overlap) cost += std::min(C[e][a], B[e + 1][b]);
        }
        p.edge[e][a * S + b] = cost;
      }
    }
  }
  return p;
}

std::vector<int> TwoSegments(const std::vector<int>& per_op) {
  std::vector<std::pair<int, int>> counts;  // (degree, count) in order of first appearance
  for (int d : per_op) {
    auto it = std::find_if(counts.begin(), counts.end(), [d](const auto& p) { return p.first == d; });
    if (it == counts.end()) {
      counts.emplace_back(d, 1);
    } else {
      ++it->second;
    }
  }
  std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (counts.size() < 2) return per_op;
  const int high = std::max(counts[0].first, counts[1].first), low = std::min(counts[0].first, counts[1].first);
  const int low_count = counts[0].first == low ? counts[0].second : counts[1].second;
  const size_t cut = 2 * static_cast<size_t>(low_count / 2);  // ops in the low segment (whole layers)
  std::vector<int> out(per_op.size(), high);
  for (size_t i = 0; i < std::min(cut, out.size()); ++i) out[i] = low;
  return out;
}

}  // namespace testbed::oases
