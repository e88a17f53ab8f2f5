#include "exec/profiled_device_model.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exec/executor_stack.h"
#include "exec/gpt_stack.h"
#include "testbed/status_macros.h"
#include "testbed/train/tensor.h"

namespace testbed::exec {

absl::StatusOr<ProfiledDeviceModel> ProfiledDeviceModel::Profile(const ModelGraph& graph, std::int64_t micro_batch,
                                                                 int tp, int repeats,
                                                                 double memory_bandwidth_bytes_per_s) {
  ProfiledDeviceModel m(graph);
  m.bandwidth_ = memory_bandwidth_bytes_per_s;
  train::SequentialModel<float> shard;
  train::Matrix<float> x;
  const std::int64_t rows = micro_batch * graph.shape.seq_len;
  TESTBED_ASSIGN_OR_RETURN(train::SequentialModel<float> full, BuildExecutorStack(graph, 7));
  if (ReadsFeatureRows(graph.shape)) {
    shard = std::move(full);
    x = train::Matrix<float>::Constant(micro_batch, graph.shape.inputs, 0.5f);
  } else {
    // One rank's shard; its all-reduces are replaced by nothing (their time is communication).
    shard = ShardGptStack(full, 0, tp, [](train::Matrix<float>&) { return absl::OkStatus(); });
    std::vector<std::int64_t> ids(static_cast<size_t>(rows));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i % static_cast<size_t>(graph.shape.vocab));
    x = train::IdsToColumn<float>(ids);
  }
  for (int l = 0; l < shard.num_layers(); ++l) {
    std::vector<double> fwd, bwd;
    train::Matrix<float> y;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      train::LayerCache<float> cache;
      const auto t0 = std::chrono::steady_clock::now();
      TESTBED_ASSIGN_OR_RETURN(y, shard.layer(l).Forward(x, cache));
      const auto t1 = std::chrono::steady_clock::now();
      train::Matrix<float> dy = train::Matrix<float>::Constant(y.rows(), y.cols(), 1e-3f);
      TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> dx, shard.layer(l).Backward(dy, cache));
      const auto t2 = std::chrono::steady_clock::now();
      (void)dx;
      fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
      bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(fwd.begin(), fwd.end());
    std::sort(bwd.begin(), bwd.end());
    m.times_[{l, static_cast<int>(Phase::kForward)}] = fwd[fwd.size() / 2];
    m.times_[{l, static_cast<int>(Phase::kRecompute)}] = fwd[fwd.size() / 2];
    m.times_[{l, static_cast<int>(Phase::kBackward)}] = bwd[bwd.size() / 2];
    x = std::move(y);
  }
  return m;
}

absl::StatusOr<double> ProfiledDeviceModel::ComputeLayerTime(const LayerWork& work, const DeviceSpec&) const {
  const std::ptrdiff_t index = work.layer - graph_->layers.data();
  if (index < 0 || index >= static_cast<std::ptrdiff_t>(graph_->layers.size())) {
    return absl::InvalidArgumentError("profiled device model: a layer of another model");
  }
  auto it = times_.find({static_cast<int>(index), static_cast<int>(work.phase)});
  if (it == times_.end()) return absl::NotFoundError(absl::StrCat("layer ", index, " was not profiled"));
  return it->second * work.fraction;
}

absl::StatusOr<double> ProfiledDeviceModel::KernelTime(double, double bytes, Precision, const DeviceSpec&) const {
  return bytes / bandwidth_;
}

double MeasureMemcpyBandwidth() {
  const size_t n = 64u << 20;
  std::vector<char> a(n, 1), b(n, 0);
  std::memcpy(b.data(), a.data(), n);  // touch both
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // A copy reads and writes: the link between two ranks carries n bytes in that time.
  return static_cast<double>(n) / best + (b[n / 2] == 7 ? 1 : 0);
}

}  // namespace testbed::exec
