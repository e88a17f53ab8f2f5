#include "strategy_search.h"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"

namespace testbed::hsdp {
namespace {

// Among optima the programme is indifferent to splits that change nothing (a layer whose
// collectives hide behind compute); each extra piece costs a collective the model does not
// charge beyond its latency, so every layer goes back to its largest class wherever that does
// not raise the cost.
void Unsplit(const Problem& p, SearchResult& r) {
  for (auto& row : r.strategy.pieces) {
    const std::vector<int> split = row;
    const size_t top = static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
    if (row[top] == p.chunks) continue;
    std::fill(row.begin(), row.end(), 0);
    row[top] = p.chunks;
    const double cost = StrategyCost(p, r.strategy);
    if (cost <= r.cost_s) {
      r.cost_s = cost;
    } else {
      row = split;
    }
  }
}

absl::Status CheckProblem(const Problem& p) {
  if (p.classes.empty()) return absl::InvalidArgumentError("HSDP needs at least one link class");
  if (p.chunks < 1) return absl::InvalidArgumentError(absl::StrCat("chunks must be at least 1, not ", p.chunks));
  return absl::OkStatus();
}

// One row of the programme under construction: sum of coefs * columns >= rhs.
struct Row {
  std::map<int, double> coefs;
  double rhs = 0;
};

class Programme {
 public:
  Programme(const Problem& p) : p_(p), L_(static_cast<int>(p.layers.size())), C_(static_cast<int>(p.classes.size())) {}

  int N(int l, int c) const { return l * C_ + c; }
  int Y(int l, int c) const { return L_ * C_ + l * C_ + c; }
  int Columns() const { return 2 * L_ * C_ + terms_; }

  // A term of the objective: a fresh column bounded below by `floor` and by every link's load
  // from the gather of layer g and the scatter of layer r (-1: none).
  void Term(double floor, int g, int r) {
    const int col = 2 * L_ * C_ + terms_++;
    std::map<LinkId, Row> per_link;
    auto add = [&](int layer, bool gather) {
      if (layer < 0 || layer >= L_) return;
      for (int c = 0; c < C_; ++c) {
        const OpCost& op = gather ? p_.classes[static_cast<size_t>(c)].gather : p_.classes[static_cast<size_t>(c)].scatter;
        const double chunk = p_.layers[static_cast<size_t>(layer)].bytes / p_.chunks;
        for (const auto& [link, spb] : op.s_per_byte) {
          Row& row = per_link[link];
          row.coefs[N(layer, c)] -= kScale * spb * chunk;
          row.coefs[Y(layer, c)] -= kScale * op.latency_s;
        }
      }
    };
    add(g, true);
    add(r, false);
    floors_.push_back(kScale * floor);
    for (auto& [link, row] : per_link) {
      row.coefs[col] += 1;
      rows_.push_back(std::move(row));
    }
  }

  absl::StatusOr<SearchResult> Solve(double time_limit_s) {
    std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> m(Cbc_newModel(), Cbc_deleteModel);
    Cbc_setLogLevel(m.get(), 0);
    Cbc_setMaximumSeconds(m.get(), time_limit_s);
    for (int l = 0; l < L_; ++l) {
      for (int c = 0; c < C_; ++c) {
        Cbc_addCol(m.get(), absl::StrCat("n_", l, "_", c).c_str(), 0, p_.chunks, 0, 1, 0, nullptr, nullptr);
      }
    }
    for (int l = 0; l < L_; ++l) {
      for (int c = 0; c < C_; ++c) Cbc_addCol(m.get(), absl::StrCat("y_", l, "_", c).c_str(), 0, 1, 0, 1, 0, nullptr, nullptr);
    }
    for (int t = 0; t < terms_; ++t) {
      Cbc_addCol(m.get(), absl::StrCat("t_", t).c_str(), floors_[static_cast<size_t>(t)], COIN_DBL_MAX_, 1, 0, 0, nullptr,
                 nullptr);
    }
    std::vector<int> cols;
    std::vector<double> vals;
    for (int l = 0; l < L_; ++l) {
      cols.clear();
      vals.clear();
      for (int c = 0; c < C_; ++c) {
        cols.push_back(N(l, c));
        vals.push_back(1);
      }
      Cbc_addRow(m.get(), absl::StrCat("split_", l).c_str(), C_, cols.data(), vals.data(), 'E', p_.chunks);
      for (int c = 0; c < C_; ++c) {
        const int cc[2] = {N(l, c), Y(l, c)};
        const double vv[2] = {1, -static_cast<double>(p_.chunks)};
        Cbc_addRow(m.get(), absl::StrCat("used_", l, "_", c).c_str(), 2, cc, vv, 'L', 0);
      }
    }
    int r = 0;
    for (const Row& row : rows_) {
      cols.clear();
      vals.clear();
      for (const auto& [col, v] : row.coefs) {
        if (v == 0) continue;
        cols.push_back(col);
        vals.push_back(v);
      }
      Cbc_addRow(m.get(), absl::StrCat("load_", r++).c_str(), static_cast<int>(cols.size()), cols.data(), vals.data(), 'G',
                 row.rhs);
    }
    Cbc_solve(m.get());
    const double* x = Cbc_getColSolution(m.get());
    if (x == nullptr || Cbc_numberSavedSolutions(m.get()) < 1) {
      return absl::InternalError(absl::StrCat("CBC found no HSDP strategy (status ", Cbc_status(m.get()), ")"));
    }
    SearchResult out;
    out.strategy.pieces.assign(static_cast<size_t>(L_), std::vector<int>(static_cast<size_t>(C_), 0));
    for (int l = 0; l < L_; ++l) {
      for (int c = 0; c < C_; ++c) out.strategy.pieces[static_cast<size_t>(l)][static_cast<size_t>(c)] =
          static_cast<int>(std::lround(x[N(l, c)]));
    }
    out.cost_s = StrategyCost(p_, out.strategy);
    out.optimal = Cbc_isProvenOptimal(m.get()) != 0;
    Unsplit(p_, out);
    return out;
  }

 private:
  static constexpr double COIN_DBL_MAX_ = 1e30;
  // Times enter the programme in microseconds: latencies of a microsecond would otherwise sit
  // at CBC's feasibility tolerance.
  static constexpr double kScale = 1e6;
  const Problem& p_;
  int L_, C_;
  int terms_ = 0;
  std::vector<double> floors_;
  std::vector<Row> rows_;
};

}  // namespace

absl::StatusOr<SearchResult> SolveMilp(const Problem& p, double time_limit_s) {
  if (absl::Status st = CheckProblem(p); !st.ok()) return st;
  const int L = static_cast<int>(p.layers.size());
  Programme prog(p);
  // The terms of StrategyCost, in its order.
  prog.Term(0, 0, -1);
  for (int l = 0; l < L; ++l) prog.Term(p.layers[static_cast<size_t>(l)].fwd_s, l + 1 < L ? l + 1 : l, -1);
  for (int l = L - 1; l >= 0; --l) prog.Term(p.layers[static_cast<size_t>(l)].bwd_s, l - 1, l + 1);
  prog.Term(0, -1, 0);
  return prog.Solve(time_limit_s);
}

absl::StatusOr<SearchResult> Enumerate(const Problem& p, double max_strategies) {
  if (absl::Status st = CheckProblem(p); !st.ok()) return st;
  const int C = static_cast<int>(p.classes.size());
  // Splits of `chunks` into C ordered parts.
  std::vector<std::vector<int>> splits;
  std::vector<int> cur(static_cast<size_t>(C), 0);
  auto rec = [&](auto&& self, int c, int left) -> void {
    if (c == C - 1) {
      cur[static_cast<size_t>(c)] = left;
      splits.push_back(cur);
      return;
    }
    for (int k = 0; k <= left; ++k) {
      cur[static_cast<size_t>(c)] = k;
      self(self, c + 1, left - k);
    }
  };
  rec(rec, 0, p.chunks);
  const double total = std::pow(static_cast<double>(splits.size()), static_cast<double>(p.layers.size()));
  if (total > max_strategies) {
    return absl::InvalidArgumentError(absl::StrCat("enumerating ", total, " strategies is more than ", max_strategies));
  }
  SearchResult best;
  best.cost_s = std::numeric_limits<double>::infinity();
  best.optimal = true;
  Strategy s;
  s.pieces.assign(p.layers.size(), splits.front());
  std::vector<size_t> idx(p.layers.size(), 0);
  while (true) {
    for (size_t l = 0; l < idx.size(); ++l) s.pieces[l] = splits[idx[l]];
    const double cost = StrategyCost(p, s);
    if (cost < best.cost_s) {
      best.cost_s = cost;
      best.strategy = s;
    }
    size_t l = 0;
    while (l < idx.size() && ++idx[l] == splits.size()) idx[l++] = 0;
    if (l == idx.size()) break;
  }
  return best;
}

}  // namespace testbed::hsdp
