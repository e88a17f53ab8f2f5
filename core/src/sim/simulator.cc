#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "huge_pages.h"
#include "sim/comm_contention.h"
#include "sim/dependents.h"
#include "sim/device_ledger.h"
#include "sim/event_queue.h"
#include "sim/link_sharing.h"
#include "sim/private_links.h"
#include "sim/stream_edges.h"
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

class Engine {
  // What starting and finishing a task needs, 32 bytes (one cache line holds two), so that
  // the engine never reads the schedule's tasks (72 bytes each, far apart) while it runs.
  struct Ctl {
    static constexpr std::int32_t kNowhere = sim::DeviceLedger::kNowhere;
    // kCheckpoint: Task::checkpoint; kHasMore: more than one stream successor; kStarted;
    // kHoldUp, kHoldDown: its Hold's delta is +1, -1; kOneNext, kManyNext: one dependent,
    // several (Ctl::next).
    static constexpr std::uint8_t kCheckpoint = 1, kHasMore = 2, kStarted = 4, kHoldUp = 8, kHoldDown = 16,
                                  kOneNext = 32, kManyNext = 64;
    // A compute task's sim::DeviceLedger::Hold (key and layers); a communication task's plan
    // (from TaskCosts::Cost, null: free).
    union Aux {
      struct Hold {
        std::uint32_t key;
        std::int32_t layers;
      } hold;
      const sim::PlannedComm* plan;
    } aux{.hold = {0, 0}};
    std::int32_t wait = 0;          // arrivals still missing: dependencies and stream heads
    std::int32_t ref = -1;          // a send's receive, a receive's send; a compute task's Task::work
    std::int32_t where = kNowhere;  // its device, or -(group + 1)
    // Its dependents (tasks listing it among their dependencies), and its first stream
    // successor: read together when it finishes. With kOneNext, `next` is its one dependent
    // (most tasks have one); with kManyNext, its row of many_ (its dependents lie at
    // next_[many_[row], many_[row + 1])); else it has none.
    std::int32_t next = 0;
    TaskId succ = -1;
    TaskKind kind = TaskKind::kCompute;
    std::uint8_t phase = 0;         // Task::phase
    std::uint8_t flags = 0;
    std::uint8_t priority = 0;      // Task::priority
    [[nodiscard]] bool started() const noexcept { return (flags & kStarted) != 0; }
  };
  static_assert(sizeof(Ctl) == 32);

 public:
  Engine(const Schedule& s, const SimInputs& in, const SimOptions& opt)
      : s_(s), in_(in), opt_(opt), flows_(in.cluster, opt.rate_updates) {}

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
      if (ctl_[static_cast<size_t>(t)].wait == 0 && !ctl_[static_cast<size_t>(t)].started()) TryStart(t);
    }
    for (std::uint64_t handled = 0; !events_.empty() && error_.ok(); ++handled) {
      if ((handled & 0xFFFF) == 0 && opt_.cancelled && opt_.cancelled()) {
        return absl::CancelledError(absl::StrCat("simulation interrupted after ", done_, " of ", n_, " tasks"));
      }
      const Event e = events_.take();
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
    // Per-task arrays are filled once, then read at random: on huge pages (huge_pages.h).
    // Each task's record is made in the main pass, not filled beforehand.
    ctl_.clear();
    ReserveHuge(ctl_, n);
    AssignHuge(end_, n, 0.0);
    // Per task: what starting and finishing it needs, and its arrivals (dependencies, then
    // the heads of its streams): its dependents, then its stream successors.
    // The ledger's micro-batch keys need the largest micro-batch and chunk first.
    ledger_ = sim::DeviceLedger(s_, s_.micro_batch_ids(), s_.chunk_ids());
    // Each task's iteration, for when each iteration ended (Finish): not needed for one.
    iterations_fit_ = s_.iterations() > 1 && s_.iterations() <= std::numeric_limits<std::uint16_t>::max();
    if (iterations_fit_) AssignHuge(iteration_, n, std::uint16_t{0});
    BeginCosts();
    const auto plan_of = [this](TaskId send) { return ctl_[static_cast<size_t>(send)].aux.plan; };
    std::vector<TaskId> early_receives;  // receives added before their sends
    // The dependents and stream edges, found in the main pass (Dependents, StreamEdges).
    sim::Dependents dependents(ctl_);
    sim::StreamEdges edges(s_, ctl_);
    for (TaskId t = 0; t < n_; ++t) {
      const size_t i = static_cast<size_t>(t);
      const std::span<const TaskId> deps = s_.deps(t);
      const Task& task = s_.task(t);
      Ctl& c = ctl_.emplace_back();
      dependents.Add(t, deps);
      const std::optional<sim::DeviceLedger::Hold> hold = ledger_.HoldOf(task);
      if (!hold) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the schedule is too large to simulate: ", s_.Describe(t),
            " lies past 2^32 (iteration, model chunk, micro-batch) combinations"));
      }
      c.aux.hold = {hold->key, hold->layers};
      if (hold->delta > 0) c.flags |= Ctl::kHoldUp;
      if (hold->delta < 0) c.flags |= Ctl::kHoldDown;
      c.wait = static_cast<std::int32_t>(deps.size());
      c.kind = task.kind;
      if (iterations_fit_) iteration_[i] = static_cast<std::uint16_t>(task.iteration);
      if (task.kind == TaskKind::kCompute) c.ref = task.work;
      c.phase = static_cast<std::uint8_t>(task.phase);
      if (task.checkpoint) c.flags |= Ctl::kCheckpoint;
      c.priority = task.priority;
      if (task.device >= 0) {
        c.where = task.device;
      } else if (task.group >= 0 && static_cast<size_t>(task.group) < s_.groups().size()) {
        c.where = -(task.group + 1);
      }
      if (task.kind == TaskKind::kRecv) {
        c.ref = task.match;
        // Its send's record, once made.
        if (task.match >= 0 && task.match < t) {
          ctl_[static_cast<size_t>(task.match)].ref = t;
        } else if (task.match > t && task.match < n_) {
          early_receives.push_back(t);
        }
      }
      // Its cost; a communication task's plan takes the place of the hold (it has none).
      const sim::PlannedComm* plan = nullptr;
      TESTBED_RETURN_IF_ERROR(costs_.Cost(t, plan, plan_of));
      if (task.kind != TaskKind::kCompute && task.kind != TaskKind::kKernel) c.aux.plan = plan;
      edges.Add(t, task);
    }
    // Sends after their receives learn them now.
    for (TaskId recv : early_receives) ctl_[static_cast<size_t>(ctl_[static_cast<size_t>(recv)].ref)].ref = recv;
    EndCosts(plan_of);
    // A task's one dependent lies in its record; several, in a CSR over the tasks with several.
    dependents.Finish(many_, next_);
    more_.clear();
    edges.Finish(more_);
    if (opt_.shared_cores > 0) {
      work_left_.assign(n, 0.0);
      share_version_.assign(n, 0);
    }
    contention_.Reset(devices, n, opt_.comm_compute_slowdown);
    return absl::OkStatus();
  }

  // What every task costs (sim/task_costs.h), priced in the main pass of Prepare: Begin
  // before it, End after it. Links only one stream uses (sim/private_links.h) are found
  // under incremental rate updates only: kFull stays the former engine.
  void BeginCosts() {
    private_links_.reset();
    if (opt_.rate_updates == RateUpdates::kIncremental) private_links_.emplace(in_.cluster.links().size());
    costs_.Begin(s_, in_.model, in_.cluster, in_.device_model, in_.collective, opt_.free_communication,
                 private_links_ ? &*private_links_ : nullptr);
  }
  void EndCosts(sim::TaskCosts::PlanOf plan_of) {
    costs_.End(plan_of);
    if (private_links_) {
      flows_.SetPrivate(private_links_->Take());
      costs_.MarkFixed([this](const CommPhase& ph) { return flows_.PrivateTransferTime(ph); });
      std::vector<sim::PlannedComm*> fixed;
      std::vector<const CommPhase*> phases;
      std::vector<const CommPlan*> others;
      costs_.ForEachPlan([&](sim::PlannedComm& p) {
        if (p.fixed) {
          fixed.push_back(&p);
          phases.push_back(&p.plan.phases.front());
        } else {
          others.push_back(&p.plan);
        }
      });
      std::vector<sim::PrivateBooks::Books> books = flows_.PlanPrivateBooks(phases, others);
      for (size_t k = 0; k < fixed.size(); ++k) fixed[k]->books = std::move(books[k]);
      private_links_.reset();
    }
    // A task's start time takes the place of its duration when it starts: one array, read
    // and written at the same place.
    start_ = std::move(costs_.duration);
  }

  void Arrive(TaskId t) {
    if (--ctl_[static_cast<size_t>(t)].wait == 0) TryStart(t);
  }

  void TryStart(TaskId t) {
    const Ctl& c = ctl_[static_cast<size_t>(t)];
    const TaskKind kind = c.kind;
    if (kind == TaskKind::kRecv || kind == TaskKind::kSend) {
      const TaskId send = kind == TaskKind::kSend ? t : c.ref;
      const TaskId recv = kind == TaskKind::kRecv ? t : c.ref;
      if (recv < 0 || ctl_[static_cast<size_t>(send)].wait != 0 || ctl_[static_cast<size_t>(recv)].wait != 0) return;
      if (ctl_[static_cast<size_t>(send)].started()) return;
      MarkStarted(send);
      MarkStarted(recv);
      StartComm(send, recv);
      return;
    }
    const size_t i = static_cast<size_t>(t);
    const double seconds = start_[i];  // its duration until it starts (PrepareCosts)
    MarkStarted(t);
    if (kind == TaskKind::kCollective || kind == TaskKind::kCopy) {
      StartComm(t, -1);
      return;
    }
    // Compute or kernel, on one device or a tensor-parallel gang.
    const double bytes = MemoryOf(c).start;
    ledger_.StartCompute(c.where, bytes, HoldOf(c), now_);
    if (opt_.shared_cores > 0) {
      CatchUpSharing();
      sharing_.push_back(t);
      work_left_[i] = seconds;
      threads_busy_ += static_cast<int>(DevicesOf(t).size());
      RescheduleSharing();
      return;
    }
    Push(contention_.StartCompute(t, DevicesOf(t), seconds, now_), EventKind::kTaskDone, t,
         contention_.version(t));
  }

  [[nodiscard]] bool Superseded(const Event& e) const {
    if (e.kind == EventKind::kPhaseDone) return flows_.act(e.id).version != e.version;
    if (!IsCompute(e.id)) return false;
    if (opt_.shared_cores > 0) return e.version != share_version_[static_cast<size_t>(e.id)];
    return !contention_.Current(e.id, e.version);
  }

  // Communication starting (+1) or ending (-1) on `d` moves the finish of the compute it slows.
  void CommOn(DeviceId d, int delta) {
    contention_.CommChanged(d, delta, now_, [this](TaskId t, double finish, std::uint32_t version) {
      Push(finish, EventKind::kTaskDone, t, version);
    });
  }

  // What a compute task takes and gives back (nothing for a kernel).
  [[nodiscard]] sim::MemoryChange MemoryOf(const Ctl& c) const {
    if (c.kind != TaskKind::kCompute) return {};
    const ComputeWork& w = s_.compute_work()[static_cast<size_t>(c.ref)];
    return sim::MemoryOf(static_cast<Phase>(c.phase), (c.flags & Ctl::kCheckpoint) != 0, w);
  }

  [[nodiscard]] static sim::DeviceLedger::Hold HoldOf(const Ctl& c) noexcept {
    const std::int8_t delta = (c.flags & Ctl::kHoldUp) != 0 ? 1 : (c.flags & Ctl::kHoldDown) != 0 ? -1 : 0;
    return {c.aux.hold.key, c.aux.hold.layers, delta};
  }

  [[nodiscard]] bool IsCompute(TaskId t) const {
    const TaskKind k = ctl_[static_cast<size_t>(t)].kind;
    return k == TaskKind::kCompute || k == TaskKind::kKernel;
  }

  // The devices a task occupies (Schedule::DevicesOf, from the engine's own copy).
  [[nodiscard]] std::span<const DeviceId> DevicesOf(TaskId t) const {
    const Ctl& c = ctl_[static_cast<size_t>(t)];
    if (c.where >= 0) return {&c.where, 1};
    if (c.where == Ctl::kNowhere) return {};
    return s_.groups()[static_cast<size_t>(-c.where - 1)];
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

  // A task's dependents and stream successor are counted down when it finishes: their
  // records are asked for now, while the task runs, rather than waited for then.
  void MarkStarted(TaskId t) {
    Ctl& c = ctl_[static_cast<size_t>(t)];
    c.flags |= Ctl::kStarted;
    start_[static_cast<size_t>(t)] = now_;
    if (c.succ >= 0) Expect(c.succ);
    if ((c.flags & Ctl::kOneNext) != 0) {
      Expect(c.next);
    } else if ((c.flags & Ctl::kManyNext) != 0) {
      __builtin_prefetch(&next_[static_cast<size_t>(many_[static_cast<size_t>(c.next)])]);
    }
  }
  void Expect(TaskId t) const {
    __builtin_prefetch(&ctl_[static_cast<size_t>(t)], 1, 2);
    __builtin_prefetch(&start_[static_cast<size_t>(t)], 1, 2);
  }

  void StartComm(TaskId task, TaskId partner) {
    Ctl& c = ctl_[static_cast<size_t>(task)];
    ledger_.Comm(c.where, +1, now_);
    if (partner >= 0) ledger_.Comm(ctl_[static_cast<size_t>(partner)].where, +1, now_);
    if (contention_.on()) ForDevices(task, partner, [&](DeviceId d) { CommOn(d, +1); });
    const sim::PlannedComm* planned = c.aux.plan;
    if (planned == nullptr || planned->plan.phases.empty()) {
      Push(now_, EventKind::kTaskDone, task);  // free (or a group of one)
      return;
    }
    if (planned->fixed) {
      // No other transfer can share its links: its finish is known now (as the activity
      // would have it: after the latency, its transfer time), and its links are booked now.
      const CommPhase& ph = planned->plan.phases.front();
      const double end = std::max(now_, now_ + ph.latency_s) + planned->transfer_s;
      flows_.NotePriority(c.priority);
      flows_.BookPrivate(planned->books, now_, end);
      Push(end, EventKind::kTaskDone, task);
      return;
    }
    StartPhase(flows_.Add(task, partner, &planned->plan, c.priority));
  }

  template <typename F>
  void ForDevices(TaskId task, TaskId partner, F&& f) const {
    for (DeviceId d : DevicesOf(task)) f(d);
    if (partner >= 0) f(ctl_[static_cast<size_t>(partner)].where);
  }

  // What the link model calls when a transfer's finish moves.
  [[nodiscard]] auto Reschedule() {
    return [this](double t, std::int32_t a, std::uint32_t version) { Push(t, EventKind::kPhaseDone, a, version); };
  }

  void StartPhase(std::int32_t a) {
    sim::Activity& act = flows_.act(a);
    const CommPhase& ph = act.plan->phases[act.phase];
    if (ph.link_bytes.empty()) {
      Push(now_ + ph.latency_s, EventKind::kPhaseDone, a, ++act.version);
      return;
    }
    flows_.StartTransfer(a, now_, Reschedule());
  }

  void EndPhase(std::int32_t a) {
    if (flows_.act(a).transferring) flows_.StopTransfer(a, now_, Reschedule());
    sim::Activity& act = flows_.act(a);
    ++act.phase;
    if (act.phase < act.plan->phases.size()) {
      StartPhase(a);
      return;
    }
    const TaskId task = act.task;
    flows_.Release(a);
    Complete(task);
  }

  void Push(double time, EventKind kind, std::int32_t id, std::uint32_t version = 0) {
    events_.push(Event{time, seq_++, id, version, kind});
  }

  void Complete(TaskId t) {
    // A send finishes together with its receive (they ran as one transfer).
    const Ctl& c = ctl_[static_cast<size_t>(t)];
    const TaskId partner = c.kind == TaskKind::kSend ? c.ref : -1;
    if (c.kind == TaskKind::kCompute || c.kind == TaskKind::kKernel) {
      if (opt_.shared_cores > 0) {
        CatchUpSharing();
        sharing_.erase(std::find(sharing_.begin(), sharing_.end(), t));
        threads_busy_ -= static_cast<int>(DevicesOf(t).size());
        RescheduleSharing();
      }
      contention_.EndCompute(t, DevicesOf(t));
      const double bytes = MemoryOf(c).end;
      ledger_.EndCompute(c.where, bytes, HoldOf(c), now_);
    } else {
      ledger_.Comm(c.where, -1, now_);
      if (partner >= 0) ledger_.Comm(ctl_[static_cast<size_t>(partner)].where, -1, now_);
      if (contention_.on()) ForDevices(t, partner, [&](DeviceId d) { CommOn(d, -1); });
    }
    Finished(t);
    if (partner >= 0) Finished(partner);
  }

  void Finished(TaskId t) {
    end_[static_cast<size_t>(t)] = now_;
    last_end_ = std::max(last_end_, now_);
    ++done_;
    if (opt_.record_timeline) {
      const Task& task = s_.task(t);
      for (DeviceId d : s_.DevicesOf(t)) {
        timeline_.push_back(TimelineEvent{t, d, task.stream, start_[static_cast<size_t>(t)], now_});
      }
    }
    const size_t i = static_cast<size_t>(t);
    // The dependents' records lie anywhere: ask for all of them before counting down any.
    const Ctl& c = ctl_[i];
    const TaskId succ = c.succ;
    if (succ >= 0) __builtin_prefetch(&ctl_[static_cast<size_t>(succ)], 1);
    if ((c.flags & Ctl::kOneNext) != 0) {
      Arrive(c.next);
    } else if ((c.flags & Ctl::kManyNext) != 0) {
      const size_t row = static_cast<size_t>(c.next);
      const std::int32_t first = many_[row], end = many_[row + 1];
      for (std::int32_t k = first; k < end; ++k) {
        __builtin_prefetch(&ctl_[static_cast<size_t>(next_[static_cast<size_t>(k)])], 1);
      }
      for (std::int32_t k = first; k < end; ++k) Arrive(next_[static_cast<size_t>(k)]);
    }
    if (succ < 0) return;
    const bool more = (ctl_[i].flags & Ctl::kHasMore) != 0;
    Arrive(succ);
    if (!more) return;
    auto it = std::lower_bound(more_.begin(), more_.end(), t, [](const auto& x, TaskId v) { return x.first < v; });
    for (; it != more_.end() && it->first == t; ++it) Arrive(it->second);
  }

  absl::Status Deadlock() const {
    std::vector<std::string> blocked;
    for (TaskId t = 0; t < n_ && blocked.size() < 6; ++t) {
      const Ctl& c = ctl_[static_cast<size_t>(t)];
      if (!c.started() && c.wait <= static_cast<std::int32_t>(s_.deps(t).size())) {
        std::vector<std::string> on;
        for (TaskId d : s_.deps(t)) {
          if (end_[static_cast<size_t>(d)] == 0 && !ctl_[static_cast<size_t>(d)].started()) on.push_back(absl::StrCat(d));
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
    r.devices = ledger_.Finish(now_);
    r.links = flows_.TakeLinkStats();
    r.timeline = std::move(timeline_);
    r.iteration_end_s.assign(static_cast<size_t>(s_.iterations()), 0.0);
    if (s_.iterations() == 1) {
      r.iteration_end_s.front() = last_end_;
    } else {
      for (TaskId t = 0; t < n_; ++t) {
        const size_t i = static_cast<size_t>(t);
        double& e = r.iteration_end_s[iterations_fit_ ? iteration_[i] : static_cast<size_t>(s_.task(t).iteration)];
        e = std::max(e, end_[i]);
      }
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
  bool iterations_fit_ = false;  // iteration_ holds every Task::iteration (more than one)
  std::int64_t done_ = 0;
  double now_ = 0;
  double last_end_ = 0;  // the latest end of any task
  std::uint32_t seq_ = 0;
  absl::Status error_;
  sim::EventQueue<Event> events_;
  std::vector<Ctl, BlockAllocator<Ctl>> ctl_;
  std::vector<double> start_, end_;  // start_ holds each task's duration until it starts
  std::vector<std::uint16_t> iteration_;  // Task::iteration, where every one fits
  // Dependents of the tasks with several (Ctl::kManyNext): row r's at [many_[r], many_[r + 1]).
  std::vector<std::int32_t> next_, many_;
  // Stream successors past each task's first (Ctl::kHasMore), by task, in order.
  std::vector<std::pair<TaskId, TaskId>> more_;
  sim::LinkSharing flows_;
  std::vector<TimelineEvent> timeline_;
  // Processor sharing: running compute tasks, their remaining full-speed seconds, the
  // current rate and since when, and each task's latest finish event.
  std::vector<TaskId> sharing_;
  std::vector<double> work_left_;
  std::vector<std::uint32_t> share_version_;
  int threads_busy_ = 0;
  double share_rate_ = 1.0, share_since_ = 0.0;
  sim::CommContention contention_;
  sim::DeviceLedger ledger_;
  sim::TaskCosts costs_;
  std::optional<sim::PrivateLinks> private_links_;  // while Prepare prices the tasks
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const SimInputs& inputs, const SimOptions& options) {
  if (!(options.comm_compute_slowdown >= 0 && options.comm_compute_slowdown < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("comm_compute_slowdown ", options.comm_compute_slowdown,
                                                   " must be in [0, 1) (the share of compute speed communication takes)"));
  }
  if (options.comm_compute_slowdown > 0 && options.shared_cores > 0) {
    return absl::InvalidArgumentError("comm_compute_slowdown and shared_cores cannot be combined");
  }
  Engine engine(schedule, inputs, options);
  return engine.Run();
}

}  // namespace testbed
