// TpPlanner::Refine (testbed/tp_planner.h): the planning chain's step shared by every
// tp_planner. Checks the planner's per-layer degrees and rewrites the plan around them: each
// stage's degree becomes its largest layer degree, its devices are regrouped into replicas of
// that degree and the micro-batch is scaled so that every device keeps its share of samples.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"
#include "testbed/tp_planner.h"

namespace testbed {

double SamplesPerDevice(const Plan& plan, int stage) {
  return static_cast<double>(plan.micro_batch) / static_cast<double>(plan.tp(stage));
}

std::vector<DeviceId> StageDevices(const Plan& plan, int stage) {
  std::vector<DeviceId> out;
  for (const StageReplica& r : plan.stages[static_cast<size_t>(stage)].replicas) {
    out.insert(out.end(), r.devices.begin(), r.devices.end());
  }
  return out;
}

absl::Status CheckLayerDegree(const Layer& layer, int degree) {
  if (degree < 1) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': tensor-parallel degree ", degree,
                                                   " is not a positive number of devices"));
  }
  if (degree == 1) return absl::OkStatus();
  auto refuse = [&](const char* what, std::int64_t size) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': tensor-parallel degree ", degree,
                                                   " does not divide its ", size, " ", what));
  };
  const bool split_heads = layer.kind == LayerKind::kAttention;
  if (split_heads && layer.heads > 0 && layer.heads % degree != 0) return refuse("attention heads", layer.heads);
  if (layer.hidden > 0 && layer.hidden % degree != 0) return refuse("hidden units", layer.hidden);
  if (layer.kind == LayerKind::kMlp && layer.ffn_hidden > 0 && layer.ffn_hidden % degree != 0) {
    return refuse("FFN units", layer.ffn_hidden);
  }
  return absl::OkStatus();
}

absl::Status ApplyTpDegrees(const ModelGraph& model, const std::vector<int>& degrees, Plan& plan) {
  if (degrees.size() != model.layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the planner gave ", degrees.size(), " degrees for a model of ",
                                                   model.layers.size(), " layers"));
  }
  for (size_t l = 0; l < degrees.size(); ++l) TESTBED_RETURN_IF_ERROR(CheckLayerDegree(model.layers[l], degrees[l]));
  // The stage degree and the micro-batch scale, the same on every stage.
  std::int64_t num = 0, den = 0;  // new micro_batch = micro_batch * num / den
  std::vector<int> stage_tp(static_cast<size_t>(plan.pp()), 1);
  for (int s = 0; s < plan.pp(); ++s) {
    int t = 1;
    for (const StageSpec& c : plan.stages[static_cast<size_t>(s)].chunks) {
      for (int l = c.first_layer; l < c.end_layer; ++l) t = std::max(t, degrees[static_cast<size_t>(l)]);
    }
    const auto devices = static_cast<int>(StageDevices(plan, s).size());
    if (devices % t != 0) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": tensor-parallel degree ", t,
                                                     " does not divide its ", devices, " devices"));
    }
    for (const StageSpec& c : plan.stages[static_cast<size_t>(s)].chunks) {
      for (int l = c.first_layer; l < c.end_layer; ++l) {
        if (t % degrees[static_cast<size_t>(l)] != 0) {
          return absl::InvalidArgumentError(absl::StrCat("layer '", model.layers[static_cast<size_t>(l)].name,
                                                         "': degree ", degrees[static_cast<size_t>(l)],
                                                         " does not divide its stage's largest degree ", t));
        }
      }
    }
    const std::int64_t mbs = plan.MicroBatches(s, 0);
    for (int r = 0; r < plan.dp(s); ++r) {
      if (plan.MicroBatches(s, r) != mbs) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": replicas run different numbers of micro-batches; "
                                                       "a tp_planner regroups replicas that run the same"));
      }
    }
    if (s == 0) {
      num = t;
      den = plan.tp(s);
    } else if (static_cast<std::int64_t>(t) * den != num * plan.tp(s)) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", s, " would change its degree by another factor than stage 0 (",
                                                     plan.tp(s), " -> ", t, " against ", den, " -> ", num,
                                                     "); the stages share one micro-batch size"));
    }
    stage_tp[static_cast<size_t>(s)] = t;
  }
  if ((plan.micro_batch * num) % den != 0) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batch ", plan.micro_batch, " x ", num, " / ", den,
                                                   " is not a whole number of samples; choose a micro-batch that is"));
  }
  plan.micro_batch = plan.micro_batch * num / den;
  for (int s = 0; s < plan.pp(); ++s) {
    Stage& st = plan.stages[static_cast<size_t>(s)];
    const std::vector<DeviceId> devices = StageDevices(plan, s);
    const std::int64_t mbs = st.replicas.front().micro_batches;
    const int t = stage_tp[static_cast<size_t>(s)];
    st.tp = t;
    st.replicas.clear();
    for (size_t i = 0; i < devices.size(); i += static_cast<size_t>(t)) {
      StageReplica r;
      r.devices.assign(devices.begin() + static_cast<std::ptrdiff_t>(i), devices.begin() + static_cast<std::ptrdiff_t>(i) + t);
      r.micro_batches = mbs;
      st.replicas.push_back(std::move(r));
    }
  }
  plan.layers.resize(model.layers.size());
  for (size_t l = 0; l < degrees.size(); ++l) plan.layers[l].tp = degrees[l];
  return absl::OkStatus();
}

absl::Status TpPlanner::Refine(RefineContext& ctx) {
  TESTBED_ASSIGN_OR_RETURN(TpAssignment a, Assign(ctx));
  TESTBED_RETURN_IF_ERROR(ApplyTpDegrees(ctx.planning.model, a.degrees, ctx.plan));
  int segments = 0;
  for (size_t l = 0; l < a.degrees.size(); ++l) segments += l == 0 || a.degrees[l] != a.degrees[l - 1] ? 1 : 0;
  const auto [lo, hi] = std::minmax_element(a.degrees.begin(), a.degrees.end());
  ctx.plan.planner_metrics.Merge(a.metrics);
  ctx.plan.planner_metrics.Add("tp_degree_max", *hi, "devices");
  ctx.plan.planner_metrics.Add("tp_degree_min", *lo, "devices");
  ctx.plan.planner_metrics.Add("tp_segments", segments, "1");
  for (Table& t : a.tables) ctx.plan.planner_tables.push_back(std::move(t));
  return absl::OkStatus();
}

}  // namespace testbed
