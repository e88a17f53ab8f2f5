#include "sim/data_audit.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace testbed::sim {
namespace {

// A tolerance for floating-point ends and starts that coincide.
constexpr double kSlack = 1e-12;

using LaneKey = std::tuple<int, int, int, int, int, int>;  // iteration, stage, replica, chunk, micro-batch, phase

bool OnDevice(const Schedule& s, TaskId id, DeviceId d) {
  const auto devices = s.DevicesOf(id);
  return std::find(devices.begin(), devices.end(), d) != devices.end();
}

bool Covers(const Task& t, int first, int end) { return t.first_layer < end && first < t.end_layer; }

class Audit {
 public:
  Audit(const Schedule& s, const std::vector<double>& start, const std::vector<double>& end)
      : s_(s), start_(start), end_(end) {
    for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
      const Task& t = s.task(id);
      if (t.kind == TaskKind::kCompute) {
        lanes_[Key(t)].push_back(id);
        for (DeviceId d : s.DevicesOf(id)) by_device_[{t.iteration, d}].push_back(id);
      } else if (t.kind == TaskKind::kKernel && t.stream == streams::kSparseComm) {
        updates_[t.iteration].push_back(id);
      } else if (t.kind == TaskKind::kCollective && t.stream == streams::kSparseComm && t.phase == Phase::kForward) {
        lookups_[t.iteration].push_back(id);
      }
    }
  }

  absl::StatusOr<AuditResult> Run() {
    for (TaskId id = 0; id < static_cast<TaskId>(s_.size()); ++id) {
      const Task& t = s_.task(id);
      if (t.kind == TaskKind::kSend) Send(id, t);
      if (t.kind == TaskKind::kCollective) Collective(id, t);
      if (t.kind == TaskKind::kCompute) AfterLookups(id, t);
    }
    if (violations_ > 0) {
      return absl::FailedPreconditionError(absl::StrCat(violations_, " task(s) start before the data they need exists; "
                                                        "the first: ", first_));
    }
    return AuditResult{checked_};
  }

 private:
  static LaneKey Key(const Task& t) {
    return {t.iteration, t.stage, t.replica, t.chunk, t.micro_batch, static_cast<int>(t.phase)};
  }

  void Need(TaskId consumer, TaskId producer) {
    ++checked_;
    if (end_[static_cast<size_t>(producer)] <= start_[static_cast<size_t>(consumer)] + kSlack) return;
    if (violations_++ == 0) {
      first_ = absl::StrCat(s_.Describe(consumer), " starts at ", start_[static_cast<size_t>(consumer)], " s, before ",
                            s_.Describe(producer), " ends at ", end_[static_cast<size_t>(producer)], " s");
    }
  }

  [[nodiscard]] LayerPart PartOf(TaskId id) const { return s_.compute(id).part; }

  void Send(TaskId id, const Task& t) {
    auto it = lanes_.find(Key(t));
    if (it == lanes_.end()) return;
    const bool backward = t.phase == Phase::kBackward;
    int lowest = -1;
    for (TaskId c : it->second) {
      if (!OnDevice(s_, c, t.device)) continue;
      if (lowest < 0 || s_.task(c).first_layer < lowest) lowest = s_.task(c).first_layer;
    }
    for (TaskId c : it->second) {
      if (!OnDevice(s_, c, t.device)) continue;
      if (backward && (s_.task(c).first_layer != lowest || PartOf(c) == LayerPart::kBackwardWeights)) continue;
      Need(id, c);
    }
  }

  void Collective(TaskId id, const Task& t) {
    const auto members = s_.DevicesOf(id);
    const bool data_stream = t.stream == streams::kDataComm || t.stream == streams::kDataComm2;
    const bool gradient_op = t.op == CollectiveOp::kAllReduce || t.op == CollectiveOp::kReduceScatter ||
                             t.op == CollectiveOp::kReduce;
    if ((t.stream == streams::kTensorComm || t.stream == streams::kCompute) && t.op == CollectiveOp::kAllReduce) {
      auto it = lanes_.find(Key(t));
      if (it == lanes_.end()) return;
      for (TaskId c : it->second) {
        const Task& ct = s_.task(c);
        if (ct.sub_batch != t.sub_batch || !Covers(ct, t.first_layer, t.first_layer + 1)) continue;
        if (std::none_of(members.begin(), members.end(), [&](DeviceId d) { return OnDevice(s_, c, d); })) continue;
        Need(id, c);
      }
      return;
    }
    if (data_stream && gradient_op) {
      for (DeviceId d : members) {
        auto it = by_device_.find({t.iteration, d});
        if (it == by_device_.end()) continue;
        for (TaskId c : it->second) {
          const Task& ct = s_.task(c);
          if (ct.phase != Phase::kBackward || PartOf(c) == LayerPart::kBackwardData) continue;
          if (Covers(ct, t.first_layer, t.end_layer)) Need(id, c);
        }
      }
      return;
    }
    if (t.stream != streams::kSparseComm || t.op != CollectiveOp::kAllToAllV) return;
    if (t.phase == Phase::kBackward) {
      for (DeviceId d : members) {
        auto it = by_device_.find({t.iteration, d});
        if (it == by_device_.end()) continue;
        for (TaskId c : it->second) {
          const Task& ct = s_.task(c);
          if (ct.phase == Phase::kBackward && PartOf(c) != LayerPart::kBackwardWeights && Covers(ct, 0, 1)) Need(id, c);
        }
      }
      return;
    }
    // A lookup of rows an update changed needs the update of the weight version it reads.
    const bool changed_rows = t.sub_batches == 1 || t.sub_batch >= 1;
    const int source = t.iteration - std::max(1, s_.weight_versions());
    if (!changed_rows || source < 0) return;
    auto it = updates_.find(source);
    if (it == updates_.end()) return;
    for (TaskId u : it->second) Need(id, u);
  }

  void AfterLookups(TaskId id, const Task& t) {
    auto it = lookups_.find(t.iteration);
    if (it == lookups_.end()) return;
    for (TaskId l : it->second) {
      const Task& lt = s_.task(l);
      // A forward in parts of its time steps needs the early rows and the changed rows of its
      // own part and those before (lookup part p + 1 of parts + 1 for forward part p).
      if (t.sub_batches > 1 && lt.sub_batches == t.sub_batches + 1 && lt.sub_batch > t.sub_batch + 1) continue;
      const auto members = s_.DevicesOf(l);
      if (std::any_of(members.begin(), members.end(), [&](DeviceId d) { return OnDevice(s_, id, d); })) Need(id, l);
    }
  }

  const Schedule& s_;
  const std::vector<double>& start_;
  const std::vector<double>& end_;
  std::map<LaneKey, std::vector<TaskId>> lanes_;
  std::map<std::pair<int, DeviceId>, std::vector<TaskId>> by_device_;
  std::map<int, std::vector<TaskId>> updates_, lookups_;
  std::int64_t checked_ = 0, violations_ = 0;
  std::string first_;
};

}  // namespace

absl::StatusOr<AuditResult> AuditDataDependencies(const Schedule& schedule, const std::vector<double>& start,
                                                  const std::vector<double>& end) {
  if (start.size() != schedule.size() || end.size() != schedule.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the timeline has ", start.size(), " starts and ", end.size(),
                                                   " ends for ", schedule.size(), " tasks"));
  }
  Audit audit(schedule, start, end);
  return audit.Run();
}

}  // namespace testbed::sim
