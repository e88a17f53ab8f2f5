#include "testbed/plan.h"

#include <algorithm>
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

absl::Status Plan::Validate(int num_layers, const Cluster& cluster) const {
  if (tp < 1 || pp < 1 || dp < 1 || virtual_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan degrees must be positive (tp ", tp, ", pp ", pp, ", dp ", dp, ", virtual stages ",
                     virtual_stages, ")"));
  }
  if (micro_batch < 1 || micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("plan has micro-batch size ", micro_batch, " and count ",
                                                   micro_batches, "; both must be >= 1"));
  }
  const size_t chunks = static_cast<size_t>(pp) * static_cast<size_t>(virtual_stages);
  if (stages.size() != chunks) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", stages.size(), " stage entries; pp x virtual stages = ",
                                                   chunks));
  }
  int next = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageSpec& st = stages[i];
    if (st.first_layer != next || st.end_layer <= st.first_layer) {
      return absl::InvalidArgumentError(absl::StrCat("stage entry ", i, " covers layers [", st.first_layer, ", ",
                                                     st.end_layer, "); expected a non-empty range starting at ",
                                                     next));
    }
    if (st.recompute_layers < 0 || st.recompute_layers > st.end_layer - st.first_layer) {
      return absl::InvalidArgumentError(absl::StrCat("stage entry ", i, " recomputes ", st.recompute_layers,
                                                     " of its ", st.end_layer - st.first_layer, " layers"));
    }
    next = st.end_layer;
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("stages cover ", next, " of the model's ", num_layers, " layers"));
  }
  if (!layer_tp.empty() && layer_tp.size() != static_cast<size_t>(num_layers)) {
    return absl::InvalidArgumentError(absl::StrCat("per-layer TP degrees given for ", layer_tp.size(), " of ",
                                                   num_layers, " layers"));
  }
  if (device_map.size() != static_cast<size_t>(num_devices())) {
    return absl::InvalidArgumentError(absl::StrCat("device map has ", device_map.size(), " entries; tp x pp x dp = ",
                                                   num_devices()));
  }
  if (num_devices() > cluster.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("plan needs ", num_devices(), " devices; cluster '", cluster.name(),
                                                   "' has ", cluster.num_devices()));
  }
  std::set<DeviceId> seen;
  for (DeviceId d : device_map) {
    if (d < 0 || d >= cluster.num_devices() || !seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrCat("device map names device ", d,
                                                     " twice or outside the cluster"));
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

}  // namespace testbed
