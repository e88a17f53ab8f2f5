#include "strategy_cost.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed::hsdp {
namespace {

// Seconds each link is busy for the pieces of one layer (gather or scatter).
void AddLoad(const Problem& p, const Strategy& s, int layer, bool gather, std::map<LinkId, double>& load) {
  if (layer < 0 || layer >= static_cast<int>(p.layers.size())) return;
  for (size_t c = 0; c < p.classes.size(); ++c) {
    const int n = s.pieces[static_cast<size_t>(layer)][c];
    if (n == 0) continue;
    const OpCost& op = gather ? p.classes[c].gather : p.classes[c].scatter;
    const double bytes = p.layers[static_cast<size_t>(layer)].bytes * n / p.chunks;
    for (const auto& [link, spb] : op.s_per_byte) load[link] += spb * bytes + op.latency_s;
  }
}

double MaxLoad(const std::map<LinkId, double>& load) {
  double m = 0;
  for (const auto& [link, t] : load) m = std::max(m, t);
  return m;
}

double Comm(const Problem& p, const Strategy& s, int gather_layer, int scatter_layer) {
  std::map<LinkId, double> load;
  AddLoad(p, s, gather_layer, true, load);
  AddLoad(p, s, scatter_layer, false, load);
  return MaxLoad(load);
}

}  // namespace

double StrategyCost(const Problem& p, const Strategy& s) {
  const int L = static_cast<int>(p.layers.size());
  if (L == 0) return 0;
  double t = Comm(p, s, 0, -1);
  for (int l = 0; l < L; ++l) {
    const int next = l + 1 < L ? l + 1 : l;  // the last forward prefetches its own backward gather
    t += std::max(p.layers[static_cast<size_t>(l)].fwd_s, Comm(p, s, next, -1));
  }
  for (int l = L - 1; l >= 0; --l) {
    t += std::max(p.layers[static_cast<size_t>(l)].bwd_s, Comm(p, s, l - 1, l + 1));
  }
  return t + Comm(p, s, -1, 0);
}

Strategy SingleClass(const Problem& p, int c) {
  Strategy s;
  s.pieces.assign(p.layers.size(), std::vector<int>(p.classes.size(), 0));
  for (auto& row : s.pieces) row[static_cast<size_t>(c)] = p.chunks;
  return s;
}

Strategy Even(const Problem& p) {
  Strategy s;
  const int n = static_cast<int>(p.classes.size());
  std::vector<int> row(p.classes.size(), 0);
  for (int c = 0; c < n; ++c) row[static_cast<size_t>(c)] = p.chunks / n + (c < p.chunks % n ? 1 : 0);
  s.pieces.assign(p.layers.size(), row);
  return s;
}

std::string Describe(const Problem& p, const Strategy& s) {
  std::map<std::vector<int>, int> splits;
  for (const auto& row : s.pieces) ++splits[row];
  std::vector<std::string> parts;
  for (const auto& [row, count] : splits) {
    std::vector<std::string> shares;
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c] > 0) shares.push_back(absl::StrCat(p.classes[c].name, " ", row[c], "/", p.chunks));
    }
    parts.push_back(absl::StrCat(count, " layer", count == 1 ? "" : "s", ": ", absl::StrJoin(shares, ", ")));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace testbed::hsdp
