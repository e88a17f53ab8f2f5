#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/task_costs.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

enum class EventKind : std::uint8_t { kTaskDone, kPhaseDone };

struct Event {
  double time;
  std::uint32_t seq;  // creation order: breaks ties deterministically
  std::int32_t id;    // task for kTaskDone, activity for kPhaseDone
  std::uint32_t version;
  EventKind kind;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
};

// A communication in flight: a collective, or a send together with its receive.
// A phase holds its links from its start; its bytes start flowing after the phase's latency
// (so the latency costs no extra event).
struct Activity {
  TaskId task = -1;
  TaskId partner = -1;
  const CommPlan* plan = nullptr;
  size_t phase = 0;
  bool transferring = false;
  double remaining = 1.0;  // fraction of the current phase's bytes still to move
  double rate = 0.0;       // fraction per second
  double updated = 0.0;    // time `remaining` was last brought up to date
  double flows_from = 0.0; // end of the phase's latency
  std::uint32_t version = 0;
};

class Engine {
 public:
  Engine(const Schedule& s, const SimInputs& in, const SimOptions& opt) : s_(s), in_(in), opt_(opt) {}

  absl::StatusOr<SimResult> Run() {
    TESTBED_RETURN_IF_ERROR(Prepare());
    // Every stream's first task has reached its head.
    for (DeviceId d = 0; d < s_.num_devices(); ++d) {
      for (int st = 0; st < s_.streams_used(); ++st) {
        const auto& order = s_.Order(d, st);
        if (!order.empty()) Arrive(order.front());
      }
    }
    for (TaskId t = 0; t < n_; ++t) {
      if (wait_[static_cast<size_t>(t)] == 0 && !started_[static_cast<size_t>(t)]) TryStart(t);
    }
    while (!events_.empty() && error_.ok()) {
      const Event e = events_.top();
      events_.pop();
      // A superseded event (its transfer was re-rated, or, under processor sharing, its
      // compute task's finish moved) is dropped before it can move the clock: the last one
      // could otherwise lie after every real event and stretch the iteration.
      if (Superseded(e)) continue;
      now_ = e.time;
      switch (e.kind) {
        case EventKind::kTaskDone:
          Complete(e.id);
          break;
        case EventKind::kPhaseDone:
          EndPhase(e.id);
          break;
      }
    }
    TESTBED_RETURN_IF_ERROR(error_);
    if (done_ < n_) return Deadlock();
    return Finish();
  }

 private:
  absl::Status Prepare() {
    n_ = static_cast<TaskId>(s_.size());
    const size_t n = static_cast<size_t>(n_);
    const int devices = s_.num_devices();
    wait_.assign(n, 0);
    started_.assign(n, 0);
    start_.assign(n, 0.0);
    end_.assign(n, 0.0);
    duration_.assign(n, 0.0);
    comm_.assign(n, nullptr);
    mem_start_.assign(n, 0.0);
    mem_end_.assign(n, 0.0);
    recv_of_send_.assign(n, -1);
    pair_of_.assign(n, -1);
    // Dependents and stream successors as CSR.
    std::vector<std::int32_t> dep_count(n + 1, 0), succ_count(n + 1, 0);
    for (TaskId t = 0; t < n_; ++t) {
      for (TaskId d : s_.deps(t)) ++dep_count[static_cast<size_t>(d) + 1];
      wait_[static_cast<size_t>(t)] = static_cast<std::int32_t>(s_.deps(t).size());
      const Task& task = s_.task(t);
      if (task.kind == TaskKind::kRecv) recv_of_send_[static_cast<size_t>(task.match)] = t;
    }
    for (DeviceId d = 0; d < devices; ++d) {
      for (int st = 0; st < s_.streams_used(); ++st) {
        const auto& order = s_.Order(d, st);
        for (size_t k = 0; k < order.size(); ++k) {
          ++wait_[static_cast<size_t>(order[k])];  // reaching the head of this stream
          if (k + 1 < order.size()) ++succ_count[static_cast<size_t>(order[k]) + 1];
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      dep_count[i + 1] += dep_count[i];
      succ_count[i + 1] += succ_count[i];
    }
    dependents_.assign(static_cast<size_t>(dep_count[n]), 0);
    successors_.assign(static_cast<size_t>(succ_count[n]), 0);
    dep_begin_ = dep_count;
    succ_begin_ = succ_count;
    {
      std::vector<std::int32_t> fill = dep_count;
      for (TaskId t = 0; t < n_; ++t) {
        for (TaskId d : s_.deps(t)) dependents_[static_cast<size_t>(fill[static_cast<size_t>(d)]++)] = t;
      }
      fill = succ_count;
      for (DeviceId d = 0; d < devices; ++d) {
        for (int st = 0; st < s_.streams_used(); ++st) {
          const auto& order = s_.Order(d, st);
          for (size_t k = 0; k + 1 < order.size(); ++k) {
            successors_[static_cast<size_t>(fill[static_cast<size_t>(order[k])]++)] = order[k + 1];
          }
        }
      }
    }
    TESTBED_RETURN_IF_ERROR(PrepareCosts());
    if (opt_.shared_cores > 0) {
      work_left_.assign(n, 0.0);
      share_version_.assign(n, 0);
    }
    computing_.assign(static_cast<size_t>(devices), 0);
    communicating_.assign(static_cast<size_t>(devices), 0);
    last_change_.assign(static_cast<size_t>(devices), 0.0);
    stats_.assign(static_cast<size_t>(devices), SimDeviceStats{});
    mem_now_.assign(static_cast<size_t>(devices), 0.0);
    const auto& links = in_.cluster.links();
    link_active_.assign(links.size(), 0);
    link_users_.assign(links.size(), {});
    link_since_.assign(links.size(), 0.0);
    link_stats_.assign(links.size(), SimLinkStats{});
    mark_.assign(0, 0);
    // Static memory of each device, and the key space of micro-batches held.
    int max_mb = 0, max_chunk = 0;
    for (const Task& task : s_.tasks()) {
      max_mb = std::max(max_mb, task.micro_batch + 1);
      max_chunk = std::max(max_chunk, task.chunk + 1);
    }
    held_key_stride_ = max_mb;
    held_chunks_ = max_chunk;
    held_.assign(static_cast<size_t>(devices), {});
    held_now_.assign(static_cast<size_t>(devices), 0);
    for (DeviceId d = 0; d < devices; ++d) {
      const double b = s_.static_bytes(d);
      stats_[static_cast<size_t>(d)].static_bytes = b;
      mem_now_[static_cast<size_t>(d)] = b;
      stats_[static_cast<size_t>(d)].memory_peak_bytes = b;
    }
    return absl::OkStatus();
  }

  absl::Status PrepareCosts() {
    TESTBED_RETURN_IF_ERROR(costs_.Prepare(s_, in_.model, in_.cluster, in_.device_model, in_.collective,
                                           opt_.free_communication));
    duration_ = std::move(costs_.duration);
    mem_start_ = std::move(costs_.mem_start);
    mem_end_ = std::move(costs_.mem_end);
    comm_ = std::move(costs_.comm);
    return absl::OkStatus();
  }

  void Arrive(TaskId t) {
    if (--wait_[static_cast<size_t>(t)] == 0) TryStart(t);
  }

  void TryStart(TaskId t) {
    const Task& task = s_.task(t);
    if (task.kind == TaskKind::kRecv || task.kind == TaskKind::kSend) {
      const TaskId send = task.kind == TaskKind::kSend ? t : task.match;
      const TaskId recv = task.kind == TaskKind::kRecv ? t : recv_of_send_[static_cast<size_t>(t)];
      if (recv < 0 || wait_[static_cast<size_t>(send)] != 0 || wait_[static_cast<size_t>(recv)] != 0) return;
      if (started_[static_cast<size_t>(send)]) return;
      MarkStarted(send);
      MarkStarted(recv);
      StartComm(send, recv);
      return;
    }
    MarkStarted(t);
    if (task.kind == TaskKind::kCollective || task.kind == TaskKind::kCopy) {
      StartComm(t, -1);
      return;
    }
    // Compute or kernel, on one device or a tensor-parallel gang.
    const size_t i = static_cast<size_t>(t);
    const bool holds = task.kind == TaskKind::kCompute && task.phase == Phase::kForward;
    for (DeviceId dev : s_.DevicesOf(t)) {
      const size_t d = static_cast<size_t>(dev);
      Account(dev);
      ++computing_[d];
      mem_now_[d] += mem_start_[i];
      stats_[d].memory_peak_bytes = std::max(stats_[d].memory_peak_bytes, mem_now_[d]);
      if (holds) Hold(task, dev, +1);
    }
    if (opt_.shared_cores > 0) {
      CatchUpSharing();
      sharing_.push_back(t);
      work_left_[i] = duration_[i];
      threads_busy_ += static_cast<int>(s_.DevicesOf(t).size());
      RescheduleSharing();
      return;
    }
    Push(now_ + duration_[i], EventKind::kTaskDone, t);
  }

  [[nodiscard]] bool Superseded(const Event& e) const {
    if (e.kind == EventKind::kPhaseDone) return acts_[static_cast<size_t>(e.id)].version != e.version;
    return opt_.shared_cores > 0 && IsCompute(e.id) && e.version != share_version_[static_cast<size_t>(e.id)];
  }

  [[nodiscard]] bool IsCompute(TaskId t) const {
    const TaskKind k = s_.task(t).kind;
    return k == TaskKind::kCompute || k == TaskKind::kKernel;
  }

  // Processor sharing (SimOptions::shared_cores): brings every running compute task's
  // remaining work up to now at the rate that held since the last change.
  void CatchUpSharing() {
    const double elapsed = now_ - share_since_;
    for (TaskId t : sharing_) {
      double& left = work_left_[static_cast<size_t>(t)];
      left = std::max(0.0, left - elapsed * share_rate_);
    }
    share_since_ = now_;
  }

  // The rate after a task started or finished, and each running task's new finish time.
  void RescheduleSharing() {
    share_rate_ = threads_busy_ > 0 ? std::min(1.0, static_cast<double>(opt_.shared_cores) / threads_busy_) : 1.0;
    for (TaskId t : sharing_) {
      const size_t i = static_cast<size_t>(t);
      Push(now_ + work_left_[i] / share_rate_, EventKind::kTaskDone, t, ++share_version_[i]);
    }
  }

  void MarkStarted(TaskId t) {
    started_[static_cast<size_t>(t)] = 1;
    start_[static_cast<size_t>(t)] = now_;
  }

  // Micro-batches with activations alive on a device: a (chunk, micro-batch) counts from
  // its first forward task until its last backward task ends.
  void Hold(const Task& task, DeviceId dev, int delta) {
    const size_t d = static_cast<size_t>(dev);
    auto& live = held_[d];
    const size_t key = (static_cast<size_t>(task.iteration) * static_cast<size_t>(held_chunks_) +
                        static_cast<size_t>(task.chunk)) * static_cast<size_t>(held_key_stride_) +
                       static_cast<size_t>(task.micro_batch);
    if (live.size() <= key) live.resize(key + 1, 0);
    int& count = live[key];
    const int layers = task.end_layer - task.first_layer;
    if (delta > 0) {
      if (count == 0) {
        ++held_now_[d];
        stats_[d].max_micro_batches_held = std::max(stats_[d].max_micro_batches_held, held_now_[d]);
      }
      count += layers;
    } else {
      count -= layers;
      if (count <= 0) {
        count = 0;
        --held_now_[d];
      }
    }
  }

  void StartComm(TaskId task, TaskId partner) {
    ForDevices(task, partner, [&](DeviceId d) {
      Account(d);
      ++communicating_[static_cast<size_t>(d)];
    });
    const CommPlan* plan = comm_[static_cast<size_t>(task)];
    if (plan == nullptr || plan->phases.empty()) {
      Push(now_, EventKind::kTaskDone, task);  // free (or a group of one)
      if (partner >= 0) pair_of_[static_cast<size_t>(task)] = partner;
      return;
    }
    Activity a;
    a.task = task;
    a.partner = partner;
    a.plan = plan;
    acts_.push_back(a);
    StartPhase(static_cast<std::int32_t>(acts_.size() - 1));
  }

  template <typename F>
  void ForDevices(TaskId task, TaskId partner, F&& f) const {
    for (DeviceId d : s_.DevicesOf(task)) f(d);
    if (partner >= 0) f(s_.task(partner).device);
  }

  void StartPhase(std::int32_t a) {
    Activity& act = acts_[static_cast<size_t>(a)];
    const CommPhase& ph = act.plan->phases[act.phase];
    for (const auto& [link, bytes] : ph.link_bytes) link_stats_[static_cast<size_t>(link)].bytes += bytes;
    if (ph.link_bytes.empty()) {
      Push(now_ + ph.latency_s, EventKind::kPhaseDone, a, ++act.version);
      return;
    }
    act.transferring = true;
    act.remaining = 1.0;
    act.rate = 0.0;
    act.updated = now_;
    act.flows_from = now_ + ph.latency_s;
    for (const auto& [link, bytes] : ph.link_bytes) {
      const size_t l = static_cast<size_t>(link);
      if (link_active_[l]++ == 0) link_since_[l] = now_;
      link_users_[l].push_back(a);
    }
    Rerate(ph, a);
  }

  // Re-rates every transfer sharing a link with `ph`: each link's bandwidth is split evenly
  // among its users; a transfer moves at the pace of its most constrained link.
  void Rerate(const CommPhase& ph, std::int32_t self) {
    ++epoch_;
    if (mark_.size() < acts_.size()) mark_.resize(acts_.size(), 0);
    const auto& links = in_.cluster.links();
    for (const auto& [link, bytes] : ph.link_bytes) {
      for (std::int32_t b : link_users_[static_cast<size_t>(link)]) {
        if (mark_[static_cast<size_t>(b)] == epoch_) continue;
        mark_[static_cast<size_t>(b)] = epoch_;
        Activity& act = acts_[static_cast<size_t>(b)];
        if (!act.transferring) continue;
        const double flowing = std::max(0.0, now_ - std::max(act.updated, act.flows_from));
        act.remaining = std::max(0.0, act.remaining - flowing * act.rate);
        act.updated = now_;
        double rate = std::numeric_limits<double>::infinity();
        for (const auto& [l2, b2] : act.plan->phases[act.phase].link_bytes) {
          if (b2 <= 0) continue;
          const double share = links[static_cast<size_t>(l2)].spec.bandwidth_bytes_per_s /
                               std::max(1, link_active_[static_cast<size_t>(l2)]);
          rate = std::min(rate, share / b2);
        }
        if (rate == act.rate && b != self) continue;  // its pending finish event still holds
        act.rate = rate;
        ++act.version;
        const double start = std::max(now_, act.flows_from);
        const double t = std::isinf(rate) ? start : start + act.remaining / rate;
        Push(t, EventKind::kPhaseDone, b, act.version);
      }
    }
  }

  void EndPhase(std::int32_t a) {
    Activity& act = acts_[static_cast<size_t>(a)];
    const CommPhase& ph = act.plan->phases[act.phase];
    if (act.transferring) {
      act.transferring = false;
      for (const auto& [link, bytes] : ph.link_bytes) {
        const size_t l = static_cast<size_t>(link);
        auto& users = link_users_[l];
        users.erase(std::find(users.begin(), users.end(), a));
        if (--link_active_[l] == 0) link_stats_[l].busy_s += now_ - link_since_[l];
      }
      ++act.version;
      Rerate(ph, -1);
    }
    ++act.phase;
    if (act.phase < act.plan->phases.size()) {
      StartPhase(a);
      return;
    }
    if (act.partner >= 0) pair_of_[static_cast<size_t>(act.task)] = act.partner;
    Complete(act.task);
  }

  void Push(double time, EventKind kind, std::int32_t id, std::uint32_t version = 0) {
    events_.push(Event{time, seq_++, id, version, kind});
  }

  // Splits the time since the device's last change into compute / exposed comm / idle.
  void Account(DeviceId d) {
    const size_t i = static_cast<size_t>(d);
    const double dt = now_ - last_change_[i];
    if (dt > 0) {
      if (computing_[i] > 0) {
        stats_[i].compute_s += dt;
      } else if (communicating_[i] > 0) {
        stats_[i].exposed_comm_s += dt;
      } else {
        stats_[i].idle_s += dt;
      }
      if (communicating_[i] > 0) stats_[i].comm_s += dt;
    }
    last_change_[i] = now_;
  }

  void Complete(TaskId t) {
    const TaskId partner = pair_of_[static_cast<size_t>(t)];
    const Task& task = s_.task(t);
    if (task.kind == TaskKind::kCompute || task.kind == TaskKind::kKernel) {
      if (opt_.shared_cores > 0) {
        CatchUpSharing();
        sharing_.erase(std::find(sharing_.begin(), sharing_.end(), t));
        threads_busy_ -= static_cast<int>(s_.DevicesOf(t).size());
        RescheduleSharing();
      }
      const bool releases = task.kind == TaskKind::kCompute && task.phase == Phase::kBackward;
      for (DeviceId dev : s_.DevicesOf(t)) {
        const size_t d = static_cast<size_t>(dev);
        Account(dev);
        --computing_[d];
        mem_now_[d] += mem_end_[static_cast<size_t>(t)];
        if (releases) Hold(task, dev, -1);
      }
    } else {
      ForDevices(t, partner, [&](DeviceId d) {
        Account(d);
        --communicating_[static_cast<size_t>(d)];
      });
    }
    Finished(t);
    if (partner >= 0) Finished(partner);
  }

  void Finished(TaskId t) {
    end_[static_cast<size_t>(t)] = now_;
    ++done_;
    if (opt_.record_timeline) {
      const Task& task = s_.task(t);
      for (DeviceId d : s_.DevicesOf(t)) {
        timeline_.push_back(TimelineEvent{t, d, task.stream, start_[static_cast<size_t>(t)], now_});
      }
    }
    for (std::int32_t k = dep_begin_[static_cast<size_t>(t)]; k < dep_begin_[static_cast<size_t>(t) + 1]; ++k) {
      Arrive(dependents_[static_cast<size_t>(k)]);
    }
    for (std::int32_t k = succ_begin_[static_cast<size_t>(t)]; k < succ_begin_[static_cast<size_t>(t) + 1]; ++k) {
      Arrive(successors_[static_cast<size_t>(k)]);
    }
  }

  absl::Status Deadlock() const {
    std::vector<std::string> blocked;
    for (TaskId t = 0; t < n_ && blocked.size() < 6; ++t) {
      if (!started_[static_cast<size_t>(t)] && wait_[static_cast<size_t>(t)] <= static_cast<std::int32_t>(s_.deps(t).size())) {
        std::vector<std::string> on;
        for (TaskId d : s_.deps(t)) {
          if (end_[static_cast<size_t>(d)] == 0 && !started_[static_cast<size_t>(d)]) on.push_back(absl::StrCat(d));
        }
        blocked.push_back(absl::StrCat(s_.Describe(t), on.empty() ? " (waits for its partner)" : absl::StrCat(" (waits for tasks ", absl::StrJoin(on, ","), ")")));
      }
    }
    return absl::FailedPreconditionError(absl::StrCat("the schedule deadlocked in simulation: ", n_ - done_, " of ", n_,
                                                      " tasks never ran; blocked at the head of their streams:\n  ",
                                                      absl::StrJoin(blocked, "\n  ")));
  }

  absl::StatusOr<SimResult> Finish() {
    SimResult r;
    r.iteration_time_s = now_;
    for (DeviceId d = 0; d < s_.num_devices(); ++d) Account(d);
    r.devices = std::move(stats_);
    r.links = std::move(link_stats_);
    r.timeline = std::move(timeline_);
    r.iteration_end_s.assign(static_cast<size_t>(s_.iterations()), 0.0);
    for (TaskId t = 0; t < n_; ++t) {
      double& e = r.iteration_end_s[static_cast<size_t>(s_.task(t).iteration)];
      e = std::max(e, end_[static_cast<size_t>(t)]);
    }
    r.task_start_s = std::move(start_);
    r.task_end_s = std::move(end_);
    r.tasks = n_;
    return r;
  }

  const Schedule& s_;
  const SimInputs& in_;
  const SimOptions& opt_;
  TaskId n_ = 0;
  std::int64_t done_ = 0;
  double now_ = 0;
  std::uint32_t seq_ = 0;
  absl::Status error_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  std::vector<std::int32_t> wait_;
  std::vector<char> started_;
  std::vector<double> start_, end_, duration_, mem_start_, mem_end_;
  std::vector<const CommPlan*> comm_;
  std::vector<TaskId> recv_of_send_;
  std::vector<std::int32_t> dep_begin_, dependents_, succ_begin_, successors_;
  std::vector<TaskId> pair_of_;  // send -> its receive while the pair is in flight
  std::vector<Activity> acts_;
  std::vector<std::uint32_t> mark_;
  std::uint32_t epoch_ = 0;
  std::vector<int> computing_, communicating_;
  std::vector<double> last_change_, mem_now_;
  std::vector<SimDeviceStats> stats_;
  std::vector<int> link_active_;
  std::vector<std::vector<std::int32_t>> link_users_;
  std::vector<double> link_since_;
  std::vector<SimLinkStats> link_stats_;
  std::vector<TimelineEvent> timeline_;
  // Processor sharing: running compute tasks, their remaining full-speed seconds, the
  // current rate and since when, and each task's latest finish event.
  std::vector<TaskId> sharing_;
  std::vector<double> work_left_;
  std::vector<std::uint32_t> share_version_;
  int threads_busy_ = 0;
  double share_rate_ = 1.0, share_since_ = 0.0;
  std::vector<std::vector<int>> held_;
  std::vector<int> held_now_;
  std::int64_t held_key_stride_ = 1;
  std::int64_t held_chunks_ = 1;
  sim::TaskCosts costs_;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const SimInputs& inputs, const SimOptions& options) {
  Engine engine(schedule, inputs, options);
  return engine.Run();
}

}  // namespace testbed
