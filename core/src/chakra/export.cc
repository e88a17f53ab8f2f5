#include "chakra/export.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "chakra/import.h"

namespace testbed::chakra {
namespace {

Attr IntAttr(const char* name, std::int64_t v) { return Attr{name, v, 0}; }

std::int64_t CollTypeOf(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return static_cast<std::int64_t>(CollType::kAllReduce);
    case CollectiveOp::kAllGather: return static_cast<std::int64_t>(CollType::kAllGather);
    case CollectiveOp::kReduceScatter: return static_cast<std::int64_t>(CollType::kReduceScatter);
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kAllToAllV: return static_cast<std::int64_t>(CollType::kAllToAll);
    case CollectiveOp::kBroadcast: return static_cast<std::int64_t>(CollType::kBroadcast);
    case CollectiveOp::kReduce: return static_cast<std::int64_t>(CollType::kReduce);
  }
  return 0;
}

}  // namespace

absl::StatusOr<ExportedTraces> ExportSchedule(const Schedule& s, std::span<const double> durations,
                                              const std::string& description) {
  if (durations.size() != s.size()) {
    return absl::InvalidArgumentError(absl::StrCat("export: ", durations.size(), " durations for ", s.size(), " tasks"));
  }
  auto order = s.ExecutionOrder();
  if (!order.ok()) return order.status();
  const int devices = s.num_devices();
  int used = 0;
  for (int d = 0; d < devices; ++d) {
    for (int st = 0; st < streams::kCount; ++st) {
      if (!s.Order(d, st).empty()) used = d + 1;
    }
  }
  ExportedTraces out;
  out.set.ranks.resize(static_cast<size_t>(used));
  for (Trace& t : out.set.ranks) {
    t.version = "0.0.4";
    t.attrs.push_back(Attr{"schema", std::string("1.0.2-chakra.0.0.4"), 0});
    t.attrs.push_back(Attr{"generator", description, 0});
  }
  for (size_t g = 0; g < s.groups().size(); ++g) {
    out.set.comm_groups.emplace_back(absl::StrCat(g), std::vector<int>(s.groups()[g].begin(), s.groups()[g].end()));
  }
  std::int64_t cross_device = 0;
  std::string first_cross;
  for (TaskId id : *order) {
    const Task& task = s.task(id);
    const auto devs = s.DevicesOf(id);
    for (size_t m = 0; m < devs.size(); ++m) {
      const DeviceId d = devs[m];
      Node n;
      n.id = static_cast<std::uint64_t>(id);
      n.name = s.Describe(id);
      for (TaskId dep : s.deps(id)) {
        const auto dd = s.DevicesOf(dep);
        if (std::find(dd.begin(), dd.end(), d) != dd.end()) {
          n.data_deps.push_back(static_cast<std::uint64_t>(dep));
          continue;
        }
        // Kept when another device of the task has it (the import joins a collective's or a
        // gang's members, and their dependencies); lost when none has.
        if (m == 0 && std::none_of(devs.begin(), devs.end(), [&](DeviceId x) {
              return std::find(dd.begin(), dd.end(), x) != dd.end();
            }) && cross_device++ == 0) {
          first_cross = absl::StrCat(s.Describe(id), " on ", s.Describe(dep));
        }
      }
      n.attrs.push_back(IntAttr(kAttrStream, task.stream));
      if (task.iteration != 0) n.attrs.push_back(IntAttr(kAttrIteration, task.iteration));
      switch (task.kind) {
        case TaskKind::kCompute:
        case TaskKind::kKernel: {
          const double sec = durations[static_cast<size_t>(id)];
          n.type = static_cast<std::int32_t>(NodeType::kComp);
          n.duration_micros = static_cast<std::uint64_t>(std::llround(sec * 1e6));
          n.attrs.push_back(Attr{kAttrDuration, sec, 0});
          n.attrs.push_back(Attr{"is_cpu_op", false, 0});
          if (task.device < 0) n.attrs.push_back(IntAttr(kAttrGang, id));
          break;
        }
        case TaskKind::kCollective: {
          n.type = static_cast<std::int32_t>(NodeType::kCommColl);
          n.attrs.push_back(IntAttr("comm_type", CollTypeOf(task.op)));
          std::int64_t bytes = task.bytes;
          if (task.op == CollectiveOp::kAllToAllV) {
            const auto& all = s.alltoallv_work()[static_cast<size_t>(task.work)].bytes;
            std::vector<std::int64_t> row(all.begin() + static_cast<std::ptrdiff_t>(m * devs.size()),
                                          all.begin() + static_cast<std::ptrdiff_t>((m + 1) * devs.size()));
            bytes = 0;
            for (std::int64_t b : row) bytes += b;
            n.attrs.push_back(Attr{kAttrAllToAllV, std::move(row), 0});
          }
          n.attrs.push_back(IntAttr("comm_size", bytes));
          n.attrs.push_back(Attr{"pg_name", absl::StrCat(task.group), 0});
          break;
        }
        case TaskKind::kSend:
        case TaskKind::kRecv: {
          const bool send = task.kind == TaskKind::kSend;
          n.type = static_cast<std::int32_t>(send ? NodeType::kCommSend : NodeType::kCommRecv);
          n.attrs.push_back(IntAttr("comm_src", send ? task.device : task.peer));
          n.attrs.push_back(IntAttr("comm_dst", send ? task.peer : task.device));
          n.attrs.push_back(IntAttr("comm_size", task.bytes));
          n.attrs.push_back(IntAttr("comm_tag", send ? id : task.match));
          break;
        }
        case TaskKind::kCopy: {
          const CopyWork& c = s.copy_work()[static_cast<size_t>(task.work)];
          n.type = static_cast<std::int32_t>(c.to_device ? NodeType::kMemLoad : NodeType::kMemStore);
          n.attrs.push_back(IntAttr("tensor_size", task.bytes));
          if (c.host >= 0) n.attrs.push_back(IntAttr(kAttrHost, c.host));
          break;
        }
      }
      out.set.ranks[static_cast<size_t>(d)].nodes.push_back(std::move(n));
    }
  }
  if (cross_device > 0) {
    out.warnings.push_back(absl::StrCat(cross_device, " dependencies between tasks of different devices left out (a "
                                        "Chakra trace's dependencies stay within its rank), first: ", first_cross));
  }
  return out;
}

}  // namespace testbed::chakra
