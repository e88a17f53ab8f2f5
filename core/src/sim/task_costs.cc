#include "sim/task_costs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "absl/strings/str_cat.h"
#include "huge_pages.h"
#include "testbed/status_macros.h"

namespace testbed::sim {

absl::Status TaskCosts::Prepare(const Schedule& s, const ModelGraph& model, const Cluster& cluster,
                                const DeviceModel& dm, const Collective& collective, bool free_communication,
                                PrivateLinks* private_links) {
  Begin(s, model, cluster, dm, collective, free_communication, private_links);
  const size_t n = s.size();
  AssignHuge(comm, n, static_cast<const PlannedComm*>(nullptr));
  const auto plan_of = [this](TaskId send) { return comm[static_cast<size_t>(send)]; };
  for (TaskId t = 0; t < static_cast<TaskId>(n); ++t) TESTBED_RETURN_IF_ERROR(Cost(t, comm[static_cast<size_t>(t)], plan_of));
  End(plan_of);
  return absl::OkStatus();
}

void TaskCosts::Begin(const Schedule& s, const ModelGraph& model, const Cluster& cluster, const DeviceModel& dm,
                      const Collective& collective, bool free_communication, PrivateLinks* private_links) {
  s_ = &s;
  model_ = &model;
  cluster_ = &cluster;
  dm_ = &dm;
  collective_ = &collective;
  free_ = free_communication;
  private_ = private_links;
  early_receives_.clear();
  told_plan_ = nullptr;
  comm.clear();
  AssignHuge(duration, s.size(), 0.0);
  specs_ = std::max<size_t>(1, cluster.device_specs().size());
  compute_cache_.assign(s.compute_work().size() * specs_ * 3, std::numeric_limits<double>::quiet_NaN());
  kernel_cache_.assign(s.kernel_work().size() * specs_, std::numeric_limits<double>::quiet_NaN());
  recent_group_.assign(s.groups().size(), Recent{});
  recent_device_.assign(static_cast<size_t>(s.num_devices()), Recent{});
  group_spec_.assign(s.groups().size(), -1);
  for (size_t g = 0; g < s.groups().size(); ++g) {
    const auto& members = s.groups()[g];
    const auto known = [&](DeviceId d) { return d >= 0 && d < cluster.num_devices(); };
    if (members.empty() || !std::all_of(members.begin(), members.end(), known)) continue;
    const int first = cluster.device(members.front()).spec_index;
    if (std::all_of(members.begin(), members.end(), [&](DeviceId d) { return cluster.device(d).spec_index == first; })) {
      group_spec_[g] = first;
    }
  }
}

absl::Status TaskCosts::Cost(TaskId t, const PlannedComm*& plan, PlanOf plan_of) {
  const Schedule& s = *s_;
  const Task& task = s.task(t);
  plan = nullptr;
  switch (task.kind) {
    case TaskKind::kCompute:
    case TaskKind::kKernel:
      return ComputeCost(t);
    case TaskKind::kSend:
    case TaskKind::kCollective:
    case TaskKind::kCopy:
      if (free_) return absl::OkStatus();
      TESTBED_RETURN_IF_ERROR(CommCost(t, plan));
      // A plan stands for its group (or device): the same plan on the same stream as the last
      // one told holds the same links from the same orders, and telling it again changes
      // nothing (PrivateLinks::Add is idempotent).
      if (private_ != nullptr && task.kind != TaskKind::kSend && (plan != told_plan_ || task.stream != told_stream_)) {
        private_->Add(plan->plan, task.stream, s.DevicesOf(t));
        told_plan_ = plan;
        told_stream_ = task.stream;
      }
      return absl::OkStatus();
    case TaskKind::kRecv:
      if (private_ == nullptr || free_) return absl::OkStatus();
      // A send's transfer holds its receive's stream too: told at the receive, or at End for
      // a receive added before its send.
      if (task.match > t) {
        early_receives_.push_back(t);
      } else if (task.match >= 0 && task.match < t) {
        AddTransfer(t, plan_of(task.match));
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void TaskCosts::End(PlanOf plan_of) {
  for (TaskId recv : early_receives_) AddTransfer(recv, plan_of(s_->task(recv).match));
  early_receives_.clear();
}

void TaskCosts::AddTransfer(TaskId recv, const PlannedComm* send_plan) {
  const Schedule& s = *s_;
  const TaskId send = s.task(recv).match;
  if (send < 0 || send_plan == nullptr) return;
  private_->Add(send_plan->plan, s.task(send).stream, s.DevicesOf(send), s.task(recv).stream, s.DevicesOf(recv));
}

absl::Status TaskCosts::ComputeCost(TaskId t) {
  const Schedule& s = *s_;
  const ModelGraph& model = *model_;
  const Cluster& cluster = *cluster_;
  const DeviceModel& dm = *dm_;
  const Task& task = s.task(t);
  const size_t i = static_cast<size_t>(t);
  auto failed = [&](const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat("device model on ", s.Describe(t), ": ", st.message()));
  };
  if (task.kind == TaskKind::kKernel) {
    const KernelWork& k = s.kernel(t);
    if (k.seconds > 0) {  // as measured: no device model
      duration[i] = k.seconds;
      return absl::OkStatus();
    }
    // A gang (device -1) runs at the pace of its slowest member.
    double time = 0;
    for (DeviceId member : s.DevicesOf(t)) {
      const int spec = cluster.device(member).spec_index;
      double& cached = kernel_cache_[static_cast<size_t>(task.work) * specs_ + static_cast<size_t>(spec)];
      if (std::isnan(cached)) {
        auto kt = dm.KernelTime(k.flops, k.bytes, k.precision, cluster.spec_of(member));
        if (!kt.ok()) return failed(kt.status());
        cached = *kt;
      }
      time = std::max(time, cached);
    }
    duration[i] = time;
    return absl::OkStatus();
  }
  const ComputeWork& w = s.compute(t);
  // A gang runs at the pace of its slowest member (heterogeneous tensor-parallel groups).
  double time = 0;
  int last_spec = -1;
  const bool gang = task.device < 0 && task.group >= 0 && static_cast<size_t>(task.group) < group_spec_.size();
  const int one_spec = gang ? group_spec_[static_cast<size_t>(task.group)] : -1;
  const DeviceId one_member = one_spec >= 0 ? s.groups()[static_cast<size_t>(task.group)].front() : -1;
  for (DeviceId member : one_spec >= 0 ? std::span<const DeviceId>(&one_member, 1) : s.DevicesOf(t)) {
    const int spec = cluster.device(member).spec_index;
    if (spec == last_spec) continue;
    last_spec = spec;
    double& cached = compute_cache_[(static_cast<size_t>(task.work) * specs_ + static_cast<size_t>(spec)) * 3 +
                                    static_cast<size_t>(task.phase)];
    if (std::isnan(cached)) {
      const DeviceSpec& dev = cluster.spec_of(member);
      double total = 0;
      for (int l = w.first_layer; l < w.end_layer; ++l) {
        LayerWork lw{&model.layers[static_cast<size_t>(l)], task.phase, w.micro_batch, w.tp, w.sequence_parallel,
                     w.precision, static_cast<double>(w.fraction), w.selective_recompute, w.part, w.expert_tokens};
        auto lt = dm.LayerTime(lw, dev);
        if (!lt.ok()) return failed(lt.status());
        total += *lt;
      }
      cached = w.time_share == 1.0f ? total : total * static_cast<double>(w.time_share);
    }
    time = std::max(time, cached);
  }
  duration[i] = time;
  return absl::OkStatus();
}

absl::Status TaskCosts::CommCost(TaskId t, const PlannedComm*& out) {
  const Schedule& s = *s_;
  const Cluster& cluster = *cluster_;
  const Collective& collective = *collective_;
  const Task& task = s.task(t);
  const bool p2p = task.kind == TaskKind::kSend;
  const bool copy = task.kind == TaskKind::kCopy;
  const bool v = task.kind == TaskKind::kCollective && task.op == CollectiveOp::kAllToAllV;
  const auto key = std::tuple(p2p ? -1 : copy ? -2 : static_cast<int>(task.op), p2p || copy ? -1 : task.group, task.bytes,
                              p2p || copy ? task.device : -1, p2p ? task.peer : -1, v || copy ? task.work : -1,
                              copy ? 0 : static_cast<int>(task.links));
  Recent* recent = nullptr;
  if (!p2p && !copy && task.group >= 0 && static_cast<size_t>(task.group) < recent_group_.size()) {
    recent = &recent_group_[static_cast<size_t>(task.group)];
  } else if ((p2p || copy) && task.device >= 0 && static_cast<size_t>(task.device) < recent_device_.size()) {
    recent = &recent_device_[static_cast<size_t>(task.device)];
  }
  if (recent != nullptr) {
    if (const PlannedComm* known = recent->Find(key); known != nullptr) {
      out = known;
      return absl::OkStatus();
    }
  }
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    absl::StatusOr<CommPlan> plan;
    const auto& group = task.group >= 0 ? s.groups()[static_cast<size_t>(task.group)] : std::vector<DeviceId>{};
    // A task pinned to some link kinds is planned on the view of the cluster over them.
    const Cluster& over = task.links == 0 || copy ? cluster : View(cluster, task.links);
    absl::Status routes = over.CheckRoutes(p2p ? std::vector<DeviceId>{task.device, task.peer} : group);
    if (!routes.ok()) {
      plan = routes;
    } else if (p2p) {
      plan = collective.PlanTransfer(task.device, task.peer, task.bytes, over);
    } else if (copy) {
      const CopyWork& c = s.copy_work()[static_cast<size_t>(task.work)];
      plan = HostCopyPlan(task.device, c.host, c.to_device, task.bytes, cluster);
    } else if (v) {
      plan = collective.PlanAllToAllV(group, s.alltoallv_work()[static_cast<size_t>(task.work)].bytes, over);
    } else {
      plan = collective.PlanCollective(task.op, group, task.bytes, over);
    }
    if (!plan.ok()) {
      return absl::Status(plan.status().code(), absl::StrCat(copy ? "copy" : "collective model", " on ", s.Describe(t), ": ",
                                                             plan.status().message()));
    }
    auto planned = std::make_unique<PlannedComm>();
    planned->plan = std::move(*plan);
    it = plans_.emplace(key, std::move(planned)).first;
  }
  out = it->second.get();
  if (recent != nullptr) recent->Note(key, it->second.get());
  return absl::OkStatus();
}

const Cluster& TaskCosts::View(const Cluster& cluster, LinkKinds kinds) {
  auto it = views_.find(kinds);
  if (it == views_.end()) it = views_.emplace(kinds, cluster.Over(kinds)).first;
  return it->second;
}

}  // namespace testbed::sim
