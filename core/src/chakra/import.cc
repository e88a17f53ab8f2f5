#include "chakra/import.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chakra/import_units.h"

namespace testbed::chakra {
namespace {

std::optional<CollectiveOp> OpOf(std::int64_t type, Warnings& warn, const std::string& where) {
  switch (static_cast<CollType>(type)) {
    case CollType::kAllReduce: return CollectiveOp::kAllReduce;
    case CollType::kReduce: return CollectiveOp::kReduce;
    case CollType::kAllGather: return CollectiveOp::kAllGather;
    case CollType::kBroadcast: return CollectiveOp::kBroadcast;
    case CollType::kAllToAll: return CollectiveOp::kAllToAll;
    case CollType::kReduceScatter: return CollectiveOp::kReduceScatter;
    case CollType::kReduceScatterBlock:
      warn.Add("REDUCE_SCATTER_BLOCK collectives simulated as reduce-scatters", where);
      return CollectiveOp::kReduceScatter;
    case CollType::kGather:
      warn.Add("GATHER collectives simulated as all-gathers (every member receives)", where);
      return CollectiveOp::kAllGather;
    case CollType::kScatter:
      warn.Add("SCATTER collectives simulated as broadcasts (every member receives all)", where);
      return CollectiveOp::kBroadcast;
    case CollType::kBarrier:
      warn.Add("BARRIER collectives simulated as all-reduces of comm_size bytes (0: latency only)", where);
      return CollectiveOp::kAllReduce;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ImportedWorkload> ImportTraceSet(const TraceSet& set, const std::string& source,
                                                const ImportOptions& options) {
  UnitBuilder b(set, source, options);
  if (absl::Status st = b.Build(); !st.ok()) return st;
  return b.Finish();
}

// --- UnitBuilder --------------------------------------------------------------------------

UnitBuilder::UnitBuilder(const TraceSet& set, const std::string& source, const ImportOptions& options)
    : set_(set), source_(source), options_(options), schedule_(static_cast<int>(set.ranks.size())) {}

std::string UnitBuilder::Where(NodeRef ref) const {
  const Node& n = node(ref);
  return absl::StrCat(source_, " rank ", ref.rank, ": node ", n.id, " '", n.name, "' (byte ", n.offset, ")");
}

absl::StatusOr<std::optional<std::int64_t>> UnitBuilder::IntAttr(NodeRef ref, const char* name) const {
  const Attr* a = node(ref).Find(name);
  if (a == nullptr) return std::optional<std::int64_t>();
  if (const std::int64_t* v = a->AsInt()) return std::optional<std::int64_t>(*v);
  if (const bool* v = a->AsBool()) return std::optional<std::int64_t>(*v ? 1 : 0);
  return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": attribute '", name, "' is not an integer"));
}

absl::Status UnitBuilder::Build() {
  if (set_.ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(source_, ": no rank's trace"));
  const int n = static_cast<int>(set_.ranks.size());
  for (const auto& [name, members] : set_.comm_groups) {
    for (int m : members) {
      if (m < 0 || m >= n) {
        return absl::InvalidArgumentError(absl::StrCat(source_, ": communicator group '", name, "' names rank ", m,
                                                       ", but the traces have ranks 0-", n - 1));
      }
    }
    group_of_name_[name] = schedule_.Group(members);
  }
  unit_of_.resize(static_cast<size_t>(n));
  index_of_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const auto& nodes = set_.ranks[static_cast<size_t>(r)].nodes;
    unit_of_[static_cast<size_t>(r)].assign(nodes.size(), -1);
    auto& index = index_of_[static_cast<size_t>(r)];
    index.reserve(nodes.size());
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      if (!index.emplace(nodes[static_cast<size_t>(i)].id, i).second) {
        return absl::InvalidArgumentError(absl::StrCat(Where({r, i}), ": a second node with this id"));
      }
    }
    nodes_ += static_cast<std::int64_t>(nodes.size());
  }
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < static_cast<int>(set_.ranks[static_cast<size_t>(r)].nodes.size()); ++i) {
      if (absl::Status st = AddNode({r, i}); !st.ok()) return st;
    }
  }
  if (absl::Status st = CheckCollectives(); !st.ok()) return st;
  if (absl::Status st = MatchSends(); !st.ok()) return st;
  if (absl::Status st = ResolveDeps(); !st.ok()) return st;
  AssignStreams();
  return absl::OkStatus();
}

int UnitBuilder::NewUnit(NodeRef ref) {
  units_.push_back(Unit{});
  units_.back().nodes.push_back(ref);
  unit_of_[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.index)] = static_cast<int>(units_.size()) - 1;
  return static_cast<int>(units_.size()) - 1;
}

void UnitBuilder::Join(int unit, NodeRef ref) {
  units_[static_cast<size_t>(unit)].nodes.push_back(ref);
  unit_of_[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.index)] = unit;
}

void UnitBuilder::NoteAttributes(NodeRef ref, std::initializer_list<const char*> known) {
  static const std::set<std::string> kOurs = {kAttrDuration, kAttrStream, kAttrIteration,
                                              kAttrGang,     kAttrAllToAllV, kAttrHost};
  const Node& n = node(ref);
  for (const Attr& a : n.attrs) {
    if (kOurs.count(a.name) || a.name == "is_cpu_op") continue;
    if (std::any_of(known.begin(), known.end(), [&](const char* k) { return a.name == k; })) continue;
    if (a.name == "involved_dim") {
      warn_.Add("attribute 'involved_dim' ignored: collectives route over the cluster's own topology", Where(ref));
    } else if (a.name == "comm_priority") {
      warn_.Add("attribute 'comm_priority' ignored: collectives of a stream run in file order", Where(ref));
    } else {
      warn_.Add(absl::StrCat("attribute '", a.name, "' not modelled"), Where(ref));
    }
  }
  for (const std::string& f : n.unmodelled_fields) warn_.Add(absl::StrCat("field '", f, "' not modelled"), Where(ref));
  if (const Attr* cpu = n.Find("is_cpu_op"); cpu != nullptr && cpu->AsBool() != nullptr && *cpu->AsBool()) {
    warn_.Add("CPU operators (is_cpu_op) run on the device's compute stream, in line with its kernels", Where(ref));
  }
}

absl::Status UnitBuilder::AddNode(NodeRef ref) {
  const Node& n = node(ref);
  switch (static_cast<NodeType>(n.type)) {
    case NodeType::kComp: return AddCompute(ref);
    case NodeType::kCommColl: return AddCollective(ref);
    case NodeType::kCommSend:
    case NodeType::kCommRecv: return AddPointToPoint(ref);
    case NodeType::kMemLoad:
    case NodeType::kMemStore: return AddCopy(ref);
    case NodeType::kMetadata:
    case NodeType::kInvalid: return absl::OkStatus();  // no work; dependencies pass through
    default:
      warn_.Add(absl::StrCat("node type ", NodeTypeName(n.type), " (", n.type,
                             ") not modelled: no task, its dependencies pass through"),
                Where(ref));
      return absl::OkStatus();
  }
}

absl::Status UnitBuilder::AddCompute(NodeRef ref) {
  const Node& n = node(ref);
  NoteAttributes(ref, {"num_ops", "tensor_size"});
  KernelWork k;
  k.op = KernelOp::kTraced;
  k.precision = options_.precision;
  if (const Attr* d = n.Find(kAttrDuration); d != nullptr && d->AsDouble() != nullptr) {
    k.seconds = *d->AsDouble();
  } else if (n.duration_micros > 0) {
    k.seconds = static_cast<double>(n.duration_micros) * 1e-6;
  } else {
    auto ops = IntAttr(ref, "num_ops");
    if (!ops.ok()) return ops.status();
    auto bytes = IntAttr(ref, "tensor_size");
    if (!bytes.ok()) return bytes.status();
    k.flops = static_cast<double>(ops->value_or(0));
    k.bytes = static_cast<double>(bytes->value_or(0));
  }
  auto gang = IntAttr(ref, kAttrGang);
  if (!gang.ok()) return gang.status();
  int unit;
  if (gang->has_value()) {
    auto [it, fresh] = gang_unit_.emplace(**gang, -1);
    if (fresh) {
      it->second = NewUnit(ref);
    } else {
      Join(it->second, ref);
      return absl::OkStatus();  // the first member's work stands for the gang
    }
    unit = it->second;
  } else {
    unit = NewUnit(ref);
  }
  Unit& u = units_[static_cast<size_t>(unit)];
  u.task.kind = TaskKind::kKernel;
  u.task.device = ref.rank;
  u.kernel = k;
  return CommonFields(ref, u);
}

absl::Status UnitBuilder::CommonFields(NodeRef ref, Unit& u) {
  auto stream = IntAttr(ref, kAttrStream);
  if (!stream.ok()) return stream.status();
  if (stream->has_value()) {
    if (**stream < 0 || **stream >= streams::kCount) {
      return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": ", kAttrStream, " = ", **stream,
                                                     ", expected 0-", streams::kCount - 1));
    }
    u.fixed_stream = static_cast<int>(**stream);
  }
  auto iteration = IntAttr(ref, kAttrIteration);
  if (!iteration.ok()) return iteration.status();
  if (iteration->has_value()) u.task.iteration = static_cast<std::int32_t>(**iteration);
  return absl::OkStatus();
}

absl::Status UnitBuilder::AddCollective(NodeRef ref) {
  const Node& n = node(ref);
  NoteAttributes(ref, {"comm_type", "comm_size", "pg_name", "comm_tag"});
  const int world = static_cast<int>(set_.ranks.size());
  int group;
  if (const Attr* pg = n.Find("pg_name"); pg != nullptr) {
    const std::string name = pg->AsString() != nullptr ? *pg->AsString()
                             : pg->AsInt() != nullptr  ? absl::StrCat(*pg->AsInt())
                                                       : std::string();
    auto it = group_of_name_.find(name);
    if (it == group_of_name_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": pg_name '", name,
                                                     "' is not a communicator group of the traces (groups: ",
                                                     set_.comm_groups.empty() ? "none, no comm_groups.json" : "", 
                                                     absl::StrJoin(set_.comm_groups, ", ",
                                                                   [](std::string* out, const auto& g) { out->append(g.first); }),
                                                     ")"));
    }
    group = it->second;
  } else {
    if (world_group_ < 0) {
      std::vector<DeviceId> all(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
      world_group_ = schedule_.Group(all);
    }
    group = world_group_;
  }
  const auto& members = schedule_.groups()[static_cast<size_t>(group)];
  if (std::find(members.begin(), members.end(), ref.rank) == members.end()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": a collective of a group rank ", ref.rank,
                                                   " is not a member of"));
  }
  auto type = IntAttr(ref, "comm_type");
  if (!type.ok()) return type.status();
  auto size = IntAttr(ref, "comm_size");
  if (!size.ok()) return size.status();
  if (!type->has_value()) return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": a collective without comm_type"));
  std::optional<CollectiveOp> op = OpOf(**type, warn_, Where(ref));
  if (!op) {
    return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": comm_type ", **type,
                                                   " is not a Chakra collective type (0-9)"));
  }
  const std::int64_t bytes = size->value_or(0);
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": comm_size ", bytes, " is negative"));
  const int ordinal = collectives_seen_[{ref.rank, group}]++;
  auto [it, fresh] = collective_unit_.emplace(std::pair{group, ordinal}, -1);
  if (!fresh) {
    Unit& u = units_[static_cast<size_t>(it->second)];
    if (u.task.op != *op && !(u.task.op == CollectiveOp::kAllToAllV && *op == CollectiveOp::kAllToAll)) {
      return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": collective ", ordinal, " of its group is ",
                                                     CollectiveOpName(*op), " here but ", CollectiveOpName(u.task.op),
                                                     " at ", Where(u.nodes.front())));
    }
    if (u.task.bytes != bytes && u.task.op != CollectiveOp::kAllToAllV) {
      return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": collective ", ordinal, " of its group has comm_size ",
                                                     bytes, " here but ", u.task.bytes, " at ", Where(u.nodes.front())));
    }
    Join(it->second, ref);
    return absl::OkStatus();
  }
  it->second = NewUnit(ref);
  Unit& u = units_[static_cast<size_t>(it->second)];
  u.task.kind = TaskKind::kCollective;
  u.task.op = *op;
  u.task.group = group;
  u.task.bytes = bytes;
  if (*op == CollectiveOp::kAllToAll && n.Find(kAttrAllToAllV) != nullptr) u.task.op = CollectiveOp::kAllToAllV;
  return CommonFields(ref, u);
}

absl::Status UnitBuilder::AddPointToPoint(NodeRef ref) {
  const Node& n = node(ref);
  const bool send = static_cast<NodeType>(n.type) == NodeType::kCommSend;
  NoteAttributes(ref, {"comm_src", "comm_dst", "comm_size", "comm_tag", "pg_name"});
  auto src = IntAttr(ref, "comm_src");
  if (!src.ok()) return src.status();
  auto dst = IntAttr(ref, "comm_dst");
  if (!dst.ok()) return dst.status();
  auto size = IntAttr(ref, "comm_size");
  if (!size.ok()) return size.status();
  auto tag = IntAttr(ref, "comm_tag");
  if (!tag.ok()) return tag.status();
  // The sender is the rank whose file holds a send (the receiver a receive's); the other end
  // must be named.
  const std::int64_t me = ref.rank;
  const std::int64_t from = send ? src->value_or(me) : src->value_or(-1);
  const std::int64_t to = send ? dst->value_or(-1) : dst->value_or(me);
  const std::int64_t world = static_cast<std::int64_t>(set_.ranks.size());
  if ((send ? from : to) != me) {
    return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": a ", send ? "send" : "receive", " with ",
                                                   send ? "comm_src " : "comm_dst ", send ? from : to,
                                                   " in rank ", me, "'s trace"));
  }
  const std::int64_t peer = send ? to : from;
  if (peer < 0 || peer >= world || peer == me) {
    return absl::InvalidArgumentError(absl::StrCat(Where(ref), ": ", send ? "comm_dst" : "comm_src", " ", peer,
                                                   " is not another rank of the traces (0-", world - 1, ")"));
  }
  const int unit = NewUnit(ref);
  Unit& u = units_[static_cast<size_t>(unit)];
  u.task.kind = send ? TaskKind::kSend : TaskKind::kRecv;
  u.task.device = static_cast<DeviceId>(me);
  u.task.peer = static_cast<DeviceId>(peer);
  u.task.bytes = size->value_or(0);
  (send ? sends_ : recvs_)[std::tuple(from, to, tag->value_or(0))].push_back(unit);
  return CommonFields(ref, u);
}

absl::Status UnitBuilder::AddCopy(NodeRef ref) {
  const Node& n = node(ref);
  NoteAttributes(ref, {"tensor_size"});
  auto size = IntAttr(ref, "tensor_size");
  if (!size.ok()) return size.status();
  auto host = IntAttr(ref, kAttrHost);
  if (!host.ok()) return host.status();
  const int unit = NewUnit(ref);
  Unit& u = units_[static_cast<size_t>(unit)];
  u.task.kind = TaskKind::kCopy;
  u.task.device = ref.rank;
  u.task.bytes = size->value_or(0);
  u.copy.to_device = static_cast<NodeType>(n.type) == NodeType::kMemLoad;
  u.copy.host = static_cast<int>(host->value_or(-1));
  return CommonFields(ref, u);
}

}  // namespace testbed::chakra
