#include "chakra/astra_text.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chakra/import.h"

namespace testbed::chakra {
namespace {

struct Pass {
  double seconds = 0;
  std::optional<std::int64_t> comm;  // CollType; none for NONE
  std::int64_t bytes = 0;
};

struct Layer {
  std::string name;
  Pass fwd, ig, wg;
};

enum class Kind { kData, kModel, kHybrid, kMicro };

// Writes one rank's nodes; ids count from 0 in the order written.
class RankWriter {
 public:
  explicit RankWriter(Trace& trace) : trace_(trace) {}

  std::uint64_t Comp(const std::string& name, double seconds, std::vector<std::uint64_t> deps) {
    Node& n = New(name, NodeType::kComp, std::move(deps));
    n.duration_micros = static_cast<std::uint64_t>(std::llround(seconds * 1e6));
    n.attrs.push_back(Attr{kAttrDuration, seconds, 0});
    return n.id;
  }
  // A collective of `p` (none for NONE) after `deps`.
  std::optional<std::uint64_t> Coll(const std::string& name, const Pass& p, const std::string& group,
                                    std::vector<std::uint64_t> deps) {
    if (!p.comm) return std::nullopt;
    Node& n = New(name, NodeType::kCommColl, std::move(deps));
    n.attrs.push_back(Attr{"comm_type", *p.comm, 0});
    n.attrs.push_back(Attr{"comm_size", p.bytes, 0});
    if (!group.empty()) n.attrs.push_back(Attr{"pg_name", group, 0});
    return n.id;
  }
  // The collective after `after`, or `after` itself when there is none.
  std::uint64_t Comm(const std::string& name, const Pass& p, const std::string& group, std::uint64_t after) {
    return Coll(name, p, group, {after}).value_or(after);
  }

 private:
  Node& New(const std::string& name, NodeType type, std::vector<std::uint64_t> deps) {
    Node& n = trace_.nodes.emplace_back();
    n.id = static_cast<std::uint64_t>(trace_.nodes.size() - 1);
    n.name = name;
    n.type = static_cast<std::int32_t>(type);
    n.data_deps = std::move(deps);
    return n;
  }
  Trace& trace_;
};

absl::StatusOr<Pass> ParsePass(const std::vector<std::string>& f, size_t at, double cycle_s, const std::string& where) {
  Pass p;
  double cycles = 0;
  if (!absl::SimpleAtod(f[at], &cycles) || cycles < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": compute time '", f[at], "' is not a number of cycles"));
  }
  p.seconds = cycles * cycle_s;
  const std::string& type = f[at + 1];
  if (type == "ALLREDUCE") p.comm = static_cast<std::int64_t>(CollType::kAllReduce);
  else if (type == "ALLGATHER") p.comm = static_cast<std::int64_t>(CollType::kAllGather);
  else if (type == "REDUCESCATTER") p.comm = static_cast<std::int64_t>(CollType::kReduceScatter);
  else if (type == "ALLTOALL") p.comm = static_cast<std::int64_t>(CollType::kAllToAll);
  else if (type != "NONE") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": communication '", type,
                                                   "', expected ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL or NONE"));
  }
  if (!absl::SimpleAtoi(f[at + 2], &p.bytes) || p.bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": communication size '", f[at + 2], "' is not a byte count"));
  }
  return p;
}

}  // namespace

absl::StatusOr<TraceSet> ConvertTextWorkload(const std::string& path, const TextWorkloadOptions& options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the text workload"));
  std::stringstream text;
  text << in.rdbuf();
  return ConvertTextWorkloadString(text.str(), path, options);
}

absl::StatusOr<TraceSet> ConvertTextWorkloadString(const std::string& text, const std::string& name,
                                                   const TextWorkloadOptions& options) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  auto fields = [](const std::string& line) {
    std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    return f;
  };
  if (lines.size() < 2) return absl::InvalidArgumentError(absl::StrCat(name, ": expected a parallelism line and a layer count"));
  const std::vector<std::string> head = fields(lines[0]);
  if (head.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ":1: no parallelism type"));
  Kind kind;
  bool data_inner = false;
  if (head[0] == "DATA") kind = Kind::kData;
  else if (head[0] == "MODEL") kind = Kind::kModel;
  else if (head[0] == "MICRO") kind = Kind::kMicro;
  else if (head[0] == "HYBRID_MODEL_DATA" || head[0] == "HYBRID_TRANSFORMER") kind = Kind::kHybrid;
  else if (head[0] == "HYBRID_DATA_MODEL") kind = Kind::kHybrid, data_inner = true;
  else {
    return absl::InvalidArgumentError(absl::StrCat(name, ":1: parallelism '", head[0], "' is not supported (DATA, MODEL, "
                                                   "HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER, MICRO)"));
  }
  int mp = options.model_parallel;
  for (size_t i = 1; i + 1 < head.size(); ++i) {
    if (head[i] == "model_parallel_NPU_group:" && mp == 0 && !absl::SimpleAtoi(head[i + 1], &mp)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":1: model_parallel_NPU_group '", head[i + 1], "' is not a count"));
    }
  }
  const int ranks = options.ranks;
  if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat(name, ": ranks = ", ranks, ", expected at least 1"));
  if (mp <= 0) mp = ranks;
  if (kind == Kind::kHybrid && ranks % mp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": model-parallel groups of ", mp, " do not divide ", ranks, " ranks"));
  }
  std::int64_t count = 0;
  const std::vector<std::string> second = fields(lines[1]);
  if (second.size() != 1 || !absl::SimpleAtoi(second[0], &count) || count < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":2: expected the number of layers"));
  }
  std::vector<Layer> layers;
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::vector<std::string> f = fields(lines[i]);
    if (f.empty()) continue;
    const std::string where = absl::StrCat(name, ":", i + 1);
    if (f.size() < 12) return absl::InvalidArgumentError(absl::StrCat(where, ": ", f.size(), " fields, a layer has 12"));
    Layer l;
    l.name = f[0];
    for (auto [pass, at] : {std::pair{&l.fwd, 2}, {&l.ig, 5}, {&l.wg, 8}}) {
      auto p = ParsePass(f, static_cast<size_t>(at), options.cycle_s, where);
      if (!p.ok()) return p.status();
      *pass = *p;
    }
    layers.push_back(std::move(l));
  }
  if (static_cast<std::int64_t>(layers.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": line 2 says ", count, " layers, the file has ", layers.size()));
  }

  TraceSet set;
  // Hybrids: model-parallel and data-parallel groups.
  const int dp = ranks / mp;
  auto mp_of = [&](int r) { return data_inner ? r % dp : r / mp; };
  auto dp_of = [&](int r) { return data_inner ? r / dp : r % mp; };
  if (kind == Kind::kHybrid) {
    for (int k = 0; k < dp; ++k) {
      std::vector<int> g;
      for (int r = 0; r < ranks; ++r) if (mp_of(r) == k) g.push_back(r);
      set.comm_groups.emplace_back(absl::StrCat("mp", k), g);
    }
    for (int k = 0; k < mp; ++k) {
      std::vector<int> g;
      for (int r = 0; r < ranks; ++r) if (dp_of(r) == k) g.push_back(r);
      set.comm_groups.emplace_back(absl::StrCat("dp", k), g);
    }
  }
  const size_t n = layers.size();
  set.ranks.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    Trace& t = set.ranks[static_cast<size_t>(r)];
    t.version = "0.0.4";
    t.attrs.push_back(Attr{"input_file", name, 0});
    RankWriter w(t);
    const std::string mpg = kind == Kind::kHybrid ? absl::StrCat("mp", mp_of(r)) : "";
    const std::string dpg = kind == Kind::kHybrid ? absl::StrCat("dp", dp_of(r)) : "";
    std::vector<std::optional<std::uint64_t>> after_update(n);  // what a layer's next forward waits for
    for (int pass = 0; pass < options.passes; ++pass) {
      if (kind == Kind::kMicro) {
        for (const Layer& l : layers) (void)w.Coll(l.name + "_WG_COMM", l.wg, "", {});
        continue;
      }
      std::vector<std::uint64_t> fwd_out(n), ig_out(n), wg(n);
      for (size_t i = 0; i < n; ++i) {
        std::vector<std::uint64_t> deps;
        if (i > 0) deps.push_back(fwd_out[i - 1]);
        if (after_update[i]) deps.push_back(*after_update[i]);
        const std::uint64_t c = w.Comp(layers[i].name + "_FWD", layers[i].fwd.seconds, deps);
        fwd_out[i] = kind == Kind::kData ? c : w.Comm(layers[i].name + "_FWD_COMM", layers[i].fwd, mpg, c);
      }
      for (size_t k = 0; k < n; ++k) {
        const size_t i = n - 1 - k;
        const Layer& l = layers[i];
        if (kind == Kind::kData) {
          // Weight gradient first, its all-reduce, then the input gradient for the layer below.
          wg[i] = w.Comp(l.name + "_BWD_WG", l.wg.seconds, {k == 0 ? fwd_out[n - 1] : ig_out[i + 1]});
          after_update[i] = w.Comm(l.name + "_WG_COMM", l.wg, "", wg[i]);
          if (i > 0) ig_out[i] = w.Comp(l.name + "_BWD_IG", l.ig.seconds, {wg[i]});
          continue;
        }
        std::vector<std::uint64_t> deps;
        if (k == 0) deps.push_back(fwd_out[n - 1]);
        else deps = {wg[i + 1], ig_out[i + 1]};
        const std::uint64_t ig = w.Comp(l.name + "_BWD_IG", l.ig.seconds, deps);
        ig_out[i] = i > 0 ? w.Comm(l.name + "_IG_COMM", l.ig, mpg, ig) : ig;
        wg[i] = w.Comp(l.name + "_BWD_WG", l.wg.seconds, {ig});
        after_update[i] = kind == Kind::kModel ? wg[i] : w.Comm(l.name + "_WG_COMM", l.wg, dpg, wg[i]);
      }
    }
  }
  return set;
}

}  // namespace testbed::chakra
