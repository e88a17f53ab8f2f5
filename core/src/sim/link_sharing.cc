#include "sim/link_sharing.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace testbed::sim {

LinkSharing::LinkSharing(const Cluster& cluster, RateUpdates mode) : mode_(mode) {
  const auto& links = cluster.links();
  bandwidth_.reserve(links.size());
  for (const Link& l : links) bandwidth_.push_back(l.spec.bandwidth_bytes_per_s);
  holders_.assign(links.size(), 0);
  share_ = bandwidth_;
  prev_share_ = bandwidth_;
  top_.assign(links.size(), 0);
  prev_top_.assign(links.size(), 0);
  users_.assign(links.size(), {});
  since_.assign(links.size(), 0.0);
  stats_.assign(links.size(), SimLinkStats{});
}

std::int32_t LinkSharing::Add(TaskId task, TaskId partner, const CommPlan* plan, std::uint8_t priority) {
  Activity a;
  a.task = task;
  a.partner = partner;
  a.plan = plan;
  a.priority = priority;
  prioritised_ = prioritised_ || priority > 0;
  if (!free_acts_.empty()) {
    const std::int32_t i = free_acts_.back();
    free_acts_.pop_back();
    Activity& slot = acts_[static_cast<size_t>(i)];
    a.version = slot.version;
    slot = a;
    return i;
  }
  acts_.push_back(a);
  return static_cast<std::int32_t>(acts_.size() - 1);
}

void LinkSharing::StartTransfer(std::int32_t a, double now, Reschedule reschedule) {
  Activity& act = acts_[static_cast<size_t>(a)];
  const CommPhase& ph = act.plan->phases[act.phase];
  for (const auto& [link, bytes] : ph.link_bytes) stats_[static_cast<size_t>(link)].bytes += bytes;
  act.transferring = true;
  act.remaining = 1.0;
  act.rate = 0.0;
  act.updated = now;
  act.flows_from = now + ph.latency_s;
  act.alone = AllPrivate(ph);
  if (act.alone) {
    // As Change and Rerate would have it: the only holder of each link, at its whole bandwidth.
    for (const auto& [link, bytes] : ph.link_bytes) {
      const size_t l = static_cast<size_t>(link);
      if (holders_[l]++ == 0) since_[l] = now;
    }
    Apply(a, WholeRate(ph), true, now, reschedule);
    return;
  }
  if (mode_ == RateUpdates::kIncremental && TakeIdleLinks(ph, a, now)) {
    // Nobody else holds its links: no one to re-rate, and its rate is its links' whole
    // bandwidth, as Rerate would find it.
    if (ph.link_bytes.size() >= kTreeLinks) BuildTree(a);
    Apply(a, FullRate(act), true, now, reschedule);
    return;
  }
  Change(ph, a, +1, now);
  if (mode_ == RateUpdates::kIncremental && ph.link_bytes.size() >= kTreeLinks) BuildTree(a);
  Rerate(ph, a, now, reschedule);
}

bool LinkSharing::TakeIdleLinks(const CommPhase& ph, std::int32_t a, double now) {
  // Each link taken as the first holder; a link held already (by another transfer, or listed
  // twice in the phase) gives back those taken so far.
  const auto& lb = ph.link_bytes;
  for (size_t i = 0; i < lb.size(); ++i) {
    const size_t l = static_cast<size_t>(lb[i].first);
    if (holders_[l] != 0) {
      for (size_t j = 0; j < i; ++j) holders_[static_cast<size_t>(lb[j].first)] = 0;
      return false;
    }
    holders_[l] = 1;
  }
  std::int32_t pos = 0;
  for (const auto& [link, bytes] : lb) {
    const size_t l = static_cast<size_t>(link);
    since_[l] = now;
    users_[l].push_back(User{a, pos++, bytes});
    Refresh(l);
  }
  return true;
}

bool LinkSharing::DropIdleLinks(const CommPhase& ph, double now) {
  for (const auto& [link, bytes] : ph.link_bytes) {
    if (holders_[static_cast<size_t>(link)] != 1) return false;
  }
  for (const auto& [link, bytes] : ph.link_bytes) {
    const size_t l = static_cast<size_t>(link);
    users_[l].clear();
    holders_[l] = 0;
    stats_[l].busy_s += now - since_[l];
    Refresh(l);
  }
  return true;
}

void LinkSharing::StopTransfer(std::int32_t a, double now, Reschedule reschedule) {
  Activity& act = acts_[static_cast<size_t>(a)];
  const CommPhase& ph = act.plan->phases[act.phase];
  act.transferring = false;
  if (act.alone) {
    for (const auto& [link, bytes] : ph.link_bytes) {
      const size_t l = static_cast<size_t>(link);
      if (--holders_[l] == 0) stats_[l].busy_s += now - since_[l];
    }
    ++act.version;
    return;
  }
  // Alone on its links: nobody else to re-rate.
  const bool alone = mode_ == RateUpdates::kIncremental && DropIdleLinks(ph, now);
  if (!alone) Change(ph, a, -1, now);
  if (act.tree >= 0) {
    free_trees_.push_back(act.tree);
    act.tree = -1;
  }
  ++act.version;
  if (!alone) Rerate(ph, -1, now, reschedule);
}

void LinkSharing::Change(const CommPhase& ph, std::int32_t a, int delta, double now) {
  for (const auto& [link, bytes] : ph.link_bytes) {
    prev_share_[static_cast<size_t>(link)] = share_[static_cast<size_t>(link)];
    prev_top_[static_cast<size_t>(link)] = top_[static_cast<size_t>(link)];
  }
  std::int32_t pos = 0;
  for (const auto& [link, bytes] : ph.link_bytes) {
    const size_t l = static_cast<size_t>(link);
    auto& users = users_[l];
    if (delta > 0) {
      if (holders_[l]++ == 0) since_[l] = now;
      users.push_back(User{a, pos++, bytes});
    } else {
      users.erase(std::find_if(users.begin(), users.end(), [a](const User& u) { return u.act == a; }));
      if (--holders_[l] == 0) stats_[l].busy_s += now - since_[l];
    }
    Refresh(l);
  }
}

std::optional<double> LinkSharing::PrivateTransferTime(const CommPhase& ph) const {
  if (ph.link_bytes.empty() || !AllPrivate(ph)) return std::nullopt;
  // Busy time is counted once per link: a link listed twice takes the general path.
  for (size_t i = 0; i < ph.link_bytes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (ph.link_bytes[j].first == ph.link_bytes[i].first) return std::nullopt;
    }
  }
  // As StartTransfer's private path and Apply compute it, operation for operation.
  const double rate = WholeRate(ph);
  if (!(rate > 0)) return std::nullopt;  // never finishes: the general path reports it
  return std::isinf(rate) ? 0.0 : 1.0 / rate;
}

double LinkSharing::WholeRate(const CommPhase& ph) const noexcept {
  double rate = std::numeric_limits<double>::infinity();
  for (const auto& [link, bytes] : ph.link_bytes) {
    if (bytes > 0) rate = std::min(rate, bandwidth_[static_cast<size_t>(link)] / bytes);
  }
  return rate;
}

bool LinkSharing::AllPrivate(const CommPhase& ph) const noexcept {
  if (private_.empty()) return false;
  for (const auto& [link, bytes] : ph.link_bytes) {
    if (private_[static_cast<size_t>(link)] == 0) return false;
  }
  return true;
}

void LinkSharing::Refresh(size_t l) {
  if (!prioritised_) {
    share_[l] = bandwidth_[l] / std::max(1, holders_[l]);
    return;
  }
  std::uint8_t top = 0;
  int urgent = 0;
  for (const User& u : users_[l]) {
    const std::uint8_t p = acts_[static_cast<size_t>(u.act)].priority;
    if (p > top) {
      top = p;
      urgent = 0;
    }
    if (p == top) ++urgent;
  }
  top_[l] = top;
  share_[l] = bandwidth_[l] / std::max(1, urgent);
}

void LinkSharing::BuildTree(std::int32_t a) {
  Activity& act = acts_[static_cast<size_t>(a)];
  const auto& lb = act.plan->phases[act.phase].link_bytes;
  if (free_trees_.empty()) {
    act.tree = static_cast<std::int32_t>(trees_.size());
    trees_.emplace_back();
  } else {
    act.tree = free_trees_.back();
    free_trees_.pop_back();
  }
  std::vector<double>& t = trees_[static_cast<size_t>(act.tree)];
  const size_t leaves = std::bit_ceil(lb.size());
  t.assign(2 * leaves, std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < lb.size(); ++i) {
    const auto& [link, bytes] = lb[i];
    if (bytes > 0) t[leaves + i] = Share(static_cast<size_t>(link), act.priority) / bytes;
  }
  for (size_t i = leaves - 1; i >= 1; --i) t[i] = std::min(t[2 * i], t[2 * i + 1]);
}

void LinkSharing::UpdateTree(const Activity& act, std::int32_t pos, double value) noexcept {
  std::vector<double>& t = trees_[static_cast<size_t>(act.tree)];
  size_t i = t.size() / 2 + static_cast<size_t>(pos);
  t[i] = value;
  for (i /= 2; i >= 1; i /= 2) {
    const double m = std::min(t[2 * i], t[2 * i + 1]);
    if (t[i] == m) break;  // nothing above changes
    t[i] = m;
  }
}

double LinkSharing::FullRate(const Activity& act) const {
  if (act.tree >= 0) return trees_[static_cast<size_t>(act.tree)][1];
  double rate = std::numeric_limits<double>::infinity();
  for (const auto& [link, bytes] : act.plan->phases[act.phase].link_bytes) {
    if (bytes <= 0) continue;
    rate = std::min(rate, Share(static_cast<size_t>(link), act.priority) / bytes);
  }
  return rate;
}

void LinkSharing::Apply(std::int32_t b, double rate, bool force, double now, Reschedule reschedule) {
  Activity& act = acts_[static_cast<size_t>(b)];
  const double flowing = std::max(0.0, now - std::max(act.updated, act.flows_from));
  act.remaining = std::max(0.0, act.remaining - flowing * act.rate);
  act.updated = now;
  if (rate == act.rate && !force) return;  // its pending finish event still holds
  act.rate = rate;
  ++act.version;
  // Held back by more urgent transfers: no finish until a re-rating gives it bandwidth again.
  if (rate <= 0 && act.remaining > 0) return;
  const double start = std::max(now, act.flows_from);
  reschedule(std::isinf(rate) || act.remaining <= 0 ? start : start + act.remaining / rate, b, act.version);
}

void LinkSharing::Mark(std::int32_t b) {
  const size_t i = static_cast<size_t>(b);
  mark_[i] = epoch_;
  visited_.push_back(b);
  candidate_[i] = acts_[i].rate;
  recompute_[i] = 0;
}

void LinkSharing::Rerate(const CommPhase& ph, std::int32_t self, double now, Reschedule reschedule) {
  ++epoch_;
  if (mark_.size() < acts_.size()) {
    mark_.resize(acts_.size(), 0);
    candidate_.resize(acts_.size(), 0.0);
    recompute_.resize(acts_.size(), 0);
  }
  if (mode_ == RateUpdates::kFull) {
    RerateFull(ph, self, now, reschedule);
    return;
  }
  // Pass 1, over the changed links only: the lowest new share each user sees there, and
  // whether one that held its rate down got faster (then only a full recompute will do).
  visited_.clear();
  for (const auto& [link, bytes] : ph.link_bytes) {
    const size_t l = static_cast<size_t>(link);
    for (const User& u : users_[l]) {
      const size_t b = static_cast<size_t>(u.act);
      if (mark_[b] != epoch_) Mark(u.act);
      if (u.bytes <= 0) continue;
      const Activity& act = acts_[b];
      const double now_share = Share(l, act.priority), was = PrevShare(l, act.priority);
      const bool faster = now_share > was;
      if (act.tree >= 0) {  // its rate is the tree's minimum, read in pass 2
        UpdateTree(act, u.pos, now_share / u.bytes);
        recompute_[b] = 1;
        continue;
      }
      candidate_[b] = std::min(candidate_[b], now_share / u.bytes);
      if (faster && was / u.bytes == act.rate) recompute_[b] = 1;
    }
  }
  // Pass 2, in the order of first visits (the order events are created in kFull).
  for (std::int32_t b : visited_) {
    const Activity& act = acts_[static_cast<size_t>(b)];
    if (!act.transferring) continue;
    const bool full = b == self || recompute_[static_cast<size_t>(b)] != 0;
    Apply(b, full ? FullRate(act) : candidate_[static_cast<size_t>(b)], b == self, now, reschedule);
  }
}

void LinkSharing::RerateFull(const CommPhase& ph, std::int32_t self, double now, Reschedule reschedule) {
  for (const auto& [link, bytes] : ph.link_bytes) {
    for (const User& u : users_[static_cast<size_t>(link)]) {
      const size_t b = static_cast<size_t>(u.act);
      if (mark_[b] == epoch_) continue;
      mark_[b] = epoch_;
      const Activity& act = acts_[b];
      if (!act.transferring) continue;
      Apply(u.act, FullRate(act), u.act == self, now, reschedule);
    }
  }
}

}  // namespace testbed::sim
