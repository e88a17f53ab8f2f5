// The importer's second pass (import_units.h): the units checked, matched, given their
// dependencies and streams, and added to the schedule in order.
#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chakra/import_units.h"

namespace testbed::chakra {

void Warnings::Add(const std::string& what, const std::string& first_where) {
  auto [it, fresh] = seen_.emplace(what, std::pair<std::int64_t, std::string>(0, first_where));
  ++it->second.first;
}

std::vector<std::string> Warnings::Lines() const {
  std::vector<std::string> out;
  for (const auto& [what, seen] : seen_) {
    out.push_back(absl::StrCat(what, ": ", seen.first, seen.first == 1 ? " node" : " nodes", ", first ", seen.second));
  }
  return out;
}

absl::Status UnitBuilder::CheckCollectives() {
  for (Unit& u : units_) {
    if (u.task.kind == TaskKind::kKernel && u.nodes.size() > 1) {  // a traced gang
      std::vector<DeviceId> members;
      for (NodeRef r : u.nodes) members.push_back(r.rank);
      std::sort(members.begin(), members.end());
      if (std::adjacent_find(members.begin(), members.end()) != members.end()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(u.nodes.back()), ": a second node of gang ",
                                                       *node(u.nodes.front()).Find(kAttrGang)->AsInt(), " on one rank"));
      }
      u.task.device = -1;
      u.task.group = schedule_.Group(members);
      continue;
    }
    if (u.task.kind != TaskKind::kCollective) continue;
    const auto& members = schedule_.groups()[static_cast<size_t>(u.task.group)];
    if (u.nodes.size() != members.size()) {
      std::vector<DeviceId> missing;
      for (DeviceId m : members) {
        if (std::none_of(u.nodes.begin(), u.nodes.end(), [&](NodeRef r) { return r.rank == m; })) missing.push_back(m);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          Where(u.nodes.front()), ": its group has ", members.size(), " ranks, but rank(s) ", absl::StrJoin(missing, ","),
          " list fewer collectives of this group (the k-th collective of a group is the same one on every member)"));
    }
    if (u.task.op != CollectiveOp::kAllToAllV) continue;
    const size_t n = members.size();
    u.alltoallv.bytes.assign(n * n, 0);
    for (NodeRef r : u.nodes) {
      const Attr* row = node(r).Find(kAttrAllToAllV);
      const std::vector<std::int64_t>* v = row != nullptr ? row->AsIntList() : nullptr;
      if (v == nullptr || v->size() != n) {
        return absl::InvalidArgumentError(absl::StrCat(Where(r), ": ", kAttrAllToAllV, " needs ", n,
                                                       " integers (bytes to each member of the group)"));
      }
      const size_t i = static_cast<size_t>(std::find(members.begin(), members.end(), r.rank) - members.begin());
      std::copy(v->begin(), v->end(), u.alltoallv.bytes.begin() + static_cast<std::ptrdiff_t>(i * n));
    }
  }
  return absl::OkStatus();
}

absl::Status UnitBuilder::MatchSends() {
  partner_.assign(units_.size(), -1);
  for (const auto& [key, sends] : sends_) {
    const auto [src, dst, tag] = key;
    auto it = recvs_.find(key);
    const size_t recvs = it == recvs_.end() ? 0 : it->second.size();
    if (recvs != sends.size()) {
      const int first = recvs < sends.size() ? sends[recvs] : it->second[sends.size()];
      return absl::InvalidArgumentError(absl::StrCat(Where(units_[static_cast<size_t>(first)].nodes.front()), ": ",
                                                     sends.size(), " send(s) from rank ", src, " to rank ", dst,
                                                     " with tag ", tag, " but ", recvs, " receive(s)"));
    }
    for (size_t k = 0; k < sends.size(); ++k) {
      const int s = sends[k], r = it->second[k];
      const Unit& su = units_[static_cast<size_t>(s)];
      const Unit& ru = units_[static_cast<size_t>(r)];
      if (su.task.bytes != ru.task.bytes) {
        return absl::InvalidArgumentError(absl::StrCat(Where(ru.nodes.front()), ": receives ", ru.task.bytes,
                                                       " bytes but its send at ", Where(su.nodes.front()), " sends ",
                                                       su.task.bytes));
      }
      partner_[static_cast<size_t>(s)] = r;
      partner_[static_cast<size_t>(r)] = s;
    }
  }
  for (const auto& [key, recvs] : recvs_) {
    if (sends_.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(Where(units_[static_cast<size_t>(recvs.front())].nodes.front()),
                                                     ": a receive from rank ", std::get<0>(key), " with tag ",
                                                     std::get<2>(key), " that no send matches"));
    }
  }
  return absl::OkStatus();
}

absl::Status UnitBuilder::ResolveDeps() {
  const int ranks = static_cast<int>(set_.ranks.size());
  for (int r = 0; r < ranks; ++r) {
    const auto& nodes = set_.ranks[static_cast<size_t>(r)].nodes;
    const auto& unit_of = unit_of_[static_cast<size_t>(r)];
    // Units each node stands for as a dependency: its own, or (a node that makes no task)
    // those of its dependencies, found depth first without recursion.
    std::vector<std::vector<int>> through(nodes.size());
    std::vector<char> state(nodes.size(), 0);  // 0 new, 1 open, 2 done
    auto index_of = [&](NodeRef from, std::uint64_t id) -> absl::StatusOr<int> {
      auto it = index_of_[static_cast<size_t>(r)].find(id);
      if (it == index_of_[static_cast<size_t>(r)].end()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(from), ": depends on node ", id,
                                                       ", which rank ", r, "'s trace does not have"));
      }
      return it->second;
    };
    auto resolve = [&](int start) -> absl::Status {
      std::vector<std::pair<int, size_t>> stack = {{start, 0}};
      state[static_cast<size_t>(start)] = 1;
      while (!stack.empty()) {
        auto& [i, next] = stack.back();
        const Node& n = nodes[static_cast<size_t>(i)];
        const size_t total = n.ctrl_deps.size() + n.data_deps.size();
        if (next == total) {
          auto& t = through[static_cast<size_t>(i)];
          std::sort(t.begin(), t.end());
          t.erase(std::unique(t.begin(), t.end()), t.end());
          state[static_cast<size_t>(i)] = 2;
          stack.pop_back();
          if (!stack.empty()) {
            auto& parent = through[static_cast<size_t>(stack.back().first)];
            parent.insert(parent.end(), through[static_cast<size_t>(i)].begin(), through[static_cast<size_t>(i)].end());
          }
          continue;
        }
        const std::uint64_t id = next < n.ctrl_deps.size() ? n.ctrl_deps[next] : n.data_deps[next - n.ctrl_deps.size()];
        ++next;
        auto d = index_of({r, i}, id);
        if (!d.ok()) return d.status();
        const int u = unit_of[static_cast<size_t>(*d)];
        if (u >= 0) {
          through[static_cast<size_t>(i)].push_back(u);
        } else if (state[static_cast<size_t>(*d)] == 2) {
          const auto& t = through[static_cast<size_t>(*d)];
          through[static_cast<size_t>(i)].insert(through[static_cast<size_t>(i)].end(), t.begin(), t.end());
        } else if (state[static_cast<size_t>(*d)] == 1) {
          return absl::InvalidArgumentError(absl::StrCat(Where({r, *d}), ": a dependency cycle through nodes that make no task"));
        } else {
          state[static_cast<size_t>(*d)] = 1;
          stack.emplace_back(*d, 0);
        }
      }
      return absl::OkStatus();
    };
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      const int u = unit_of[static_cast<size_t>(i)];
      if (u < 0) continue;
      // The node's own dependencies (not the node itself): resolve it as if it made no task.
      const Node& n = nodes[static_cast<size_t>(i)];
      auto& deps = units_[static_cast<size_t>(u)].deps;
      for (const auto* list : {&n.ctrl_deps, &n.data_deps}) {
        for (std::uint64_t id : *list) {
          auto d = index_of({r, i}, id);
          if (!d.ok()) return d.status();
          const int du = unit_of[static_cast<size_t>(*d)];
          if (du >= 0) {
            deps.push_back(du);
            continue;
          }
          if (state[static_cast<size_t>(*d)] == 0) {
            if (absl::Status st = resolve(*d); !st.ok()) return st;
          }
          const auto& t = through[static_cast<size_t>(*d)];
          deps.insert(deps.end(), t.begin(), t.end());
        }
      }
    }
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    auto& deps = units_[u].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    if (std::binary_search(deps.begin(), deps.end(), static_cast<int>(u))) {
      return absl::InvalidArgumentError(absl::StrCat(Where(units_[u].nodes.front()),
                                                     ": depends on itself (through another member of its collective or gang)"));
    }
  }
  return absl::OkStatus();
}

void UnitBuilder::AssignStreams() {
  constexpr std::uint8_t kStreams[] = {streams::kDataComm,  streams::kTensorComm, streams::kExpertComm,
                                       streams::kParamComm, streams::kParamComm2, streams::kDataComm2,
                                       streams::kContextComm, streams::kSparseComm};
  std::vector<std::uint32_t> used(set_.ranks.size(), 0);  // per device: streams its groups took
  for (const Unit& u : units_) {
    if (u.task.kind != TaskKind::kCollective || u.fixed_stream >= 0 || group_stream_.count(u.task.group)) continue;
    const auto& members = schedule_.groups()[static_cast<size_t>(u.task.group)];
    std::uint32_t taken = 0;
    for (DeviceId m : members) taken |= used[static_cast<size_t>(m)];
    std::uint8_t stream = kStreams[0];
    bool found = false;
    for (std::uint8_t s : kStreams) {
      if ((taken & (1u << s)) == 0) {
        stream = s;
        found = true;
        break;
      }
    }
    if (!found) {
      warn_.Add("more communicator groups share a device than there are communication streams: some groups share a stream",
                Where(u.nodes.front()));
    }
    group_stream_[u.task.group] = stream;
    for (DeviceId m : members) used[static_cast<size_t>(m)] |= 1u << stream;
  }
}

int UnitBuilder::StreamOf(const Unit& u) const {
  if (u.fixed_stream >= 0) return u.fixed_stream;
  switch (u.task.kind) {
    case TaskKind::kCompute:
    case TaskKind::kKernel: return streams::kCompute;
    case TaskKind::kCopy: return streams::kHostCopy;
    case TaskKind::kSend: return streams::kPipelineComm;
    case TaskKind::kRecv: return streams::kPipelineRecv;
    case TaskKind::kCollective: return group_stream_.at(u.task.group);
  }
  return streams::kCompute;
}

absl::StatusOr<ImportedWorkload> UnitBuilder::Finish() {
  const size_t n = units_.size();
  // Edges of the order: dependencies, each rank's file order per stream, a receive after
  // its send (an order only: the two run as one transfer).
  std::vector<std::pair<int, int>> edges;
  for (size_t u = 0; u < n; ++u) {
    for (int d : units_[u].deps) edges.emplace_back(d, static_cast<int>(u));
    if (units_[u].task.kind == TaskKind::kRecv) edges.emplace_back(partner_[u], static_cast<int>(u));
  }
  for (size_t r = 0; r < unit_of_.size(); ++r) {
    int last[streams::kCount];
    std::fill(std::begin(last), std::end(last), -1);
    for (int u : unit_of_[r]) {
      if (u < 0) continue;
      const int s = StreamOf(units_[static_cast<size_t>(u)]);
      if (last[s] >= 0 && last[s] != u) edges.emplace_back(last[s], u);
      last[s] = u;
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<std::int64_t> begin(n + 1, 0);
  std::vector<int> indegree(n, 0);
  for (auto [from, to] : edges) {
    ++begin[static_cast<size_t>(from) + 1];
    ++indegree[static_cast<size_t>(to)];
  }
  for (size_t u = 0; u < n; ++u) begin[u + 1] += begin[u];
  // Ready units by their first node's place in its file, then rank.
  auto key = [&](int u) {
    const NodeRef r = units_[static_cast<size_t>(u)].nodes.front();
    return (static_cast<std::uint64_t>(r.index) << 24) | static_cast<std::uint64_t>(r.rank);
  };
  std::priority_queue<std::pair<std::uint64_t, int>, std::vector<std::pair<std::uint64_t, int>>, std::greater<>> ready;
  for (size_t u = 0; u < n; ++u) {
    if (indegree[u] == 0) ready.emplace(key(static_cast<int>(u)), static_cast<int>(u));
  }
  std::vector<TaskId> task_of(n, -1);
  std::vector<TaskId> deps;
  while (!ready.empty()) {
    const int u = ready.top().second;
    ready.pop();
    Unit& unit = units_[static_cast<size_t>(u)];
    Task t = unit.task;
    t.stream = static_cast<std::uint8_t>(StreamOf(unit));
    if (t.kind == TaskKind::kKernel) t.work = schedule_.AddWork(unit.kernel);
    if (t.kind == TaskKind::kCopy) t.work = schedule_.AddWork(unit.copy);
    if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kAllToAllV) t.work = schedule_.AddWork(unit.alltoallv);
    deps.clear();
    for (int d : unit.deps) deps.push_back(task_of[static_cast<size_t>(d)]);
    const TaskId id = schedule_.Add(t, deps);
    task_of[static_cast<size_t>(u)] = id;
    if (t.kind == TaskKind::kRecv) schedule_.Link(id, task_of[static_cast<size_t>(partner_[static_cast<size_t>(u)])]);
    for (std::int64_t e = begin[static_cast<size_t>(u)]; e < begin[static_cast<size_t>(u) + 1]; ++e) {
      const int next = edges[static_cast<size_t>(e)].second;
      if (--indegree[static_cast<size_t>(next)] == 0) ready.emplace(key(next), next);
    }
  }
  if (schedule_.size() < n) {
    std::vector<std::string> stuck;
    for (size_t u = 0; u < n && stuck.size() < 4; ++u) {
      if (task_of[u] < 0 && indegree[u] > 0) stuck.push_back(Where(units_[u].nodes.front()));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": ", n - schedule_.size(), " node(s) can never run: a dependency cycle, or a dependency on a node listed "
        "later on the same stream of its rank (each stream runs in file order), e.g. ", absl::StrJoin(stuck, "; ")));
  }
  ImportedWorkload out;
  out.schedule = std::move(schedule_);
  out.warnings = warn_.Lines();
  out.nodes = nodes_;
  return out;
}

}  // namespace testbed::chakra
