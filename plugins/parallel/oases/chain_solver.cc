#include "chain_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace testbed::oases {
namespace {

struct Label {
  double cost = 0;
  double memory = 0;
  int parent_choice = -1;  // choice of the previous op
  int parent_label = -1;   // index in that (op - 1, choice)'s labels
};

absl::Status Check(const ChainProblem& p) {
  const auto S = static_cast<size_t>(p.choices);
  if (p.ops < 1 || p.choices < 1) return absl::InvalidArgumentError("the chain needs at least one op and one choice");
  if (p.node.size() != static_cast<size_t>(p.ops) || p.memory.size() != static_cast<size_t>(p.ops) ||
      p.edge.size() != static_cast<size_t>(p.ops - 1)) {
    return absl::InvalidArgumentError("chain problem: node, memory and edge tables do not match the op count");
  }
  for (int i = 0; i < p.ops; ++i) {
    if (p.node[static_cast<size_t>(i)].size() != S || p.memory[static_cast<size_t>(i)].size() != S) {
      return absl::InvalidArgumentError(absl::StrCat("chain problem: op ", i, " has the wrong number of choices"));
    }
    if (i + 1 < p.ops && p.edge[static_cast<size_t>(i)].size() != S * S) {
      return absl::InvalidArgumentError(absl::StrCat("chain problem: edge ", i, " has the wrong number of pairs"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double AssignmentCost(const ChainProblem& p, const std::vector<int>& c) {
  double total = 0;
  for (int i = 0; i < p.ops; ++i) {
    total += p.node[static_cast<size_t>(i)][static_cast<size_t>(c[static_cast<size_t>(i)])];
    if (i + 1 < p.ops) {
      total += p.edge[static_cast<size_t>(i)][static_cast<size_t>(c[static_cast<size_t>(i)] * p.choices + c[static_cast<size_t>(i) + 1])];
    }
  }
  return total;
}

double AssignmentMemory(const ChainProblem& p, const std::vector<int>& c) {
  double total = 0;
  for (int i = 0; i < p.ops; ++i) total += p.memory[static_cast<size_t>(i)][static_cast<size_t>(c[static_cast<size_t>(i)])];
  return total;
}

absl::StatusOr<ChainSolution> SolveChain(const ChainProblem& p) {
  if (absl::Status st = Check(p); !st.ok()) return st;
  const auto n = static_cast<size_t>(p.ops), S = static_cast<size_t>(p.choices);
  // Least memory of ops [i, n).
  std::vector<double> rest(n + 1, 0.0);
  for (size_t i = n; i-- > 0;) rest[i] = rest[i + 1] + *std::min_element(p.memory[i].begin(), p.memory[i].end());
  // Sums of the same memories in another order may differ in the last bits.
  const double budget = p.budget + std::abs(p.budget) * 1e-12;
  if (rest[0] > budget) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "no assignment of degrees fits: even the least memory of every op adds up to %.2f GiB, over the budget of "
        "%.2f GiB", rest[0] / 1073741824.0, p.budget / 1073741824.0));
  }
  std::vector<std::vector<std::vector<Label>>> labels(n, std::vector<std::vector<Label>>(S));
  std::int64_t kept = 0;
  // Pareto filter: by memory ascending, keep a label only if cheaper than every one before it.
  auto prune = [&](std::vector<Label>& v) {
    std::stable_sort(v.begin(), v.end(), [](const Label& a, const Label& b) {
      return a.memory != b.memory ? a.memory < b.memory : a.cost < b.cost;
    });
    std::vector<Label> out;
    double best = std::numeric_limits<double>::infinity();
    for (const Label& l : v) {
      if (l.cost < best) {
        out.push_back(l);
        best = l.cost;
      }
    }
    v = std::move(out);
    kept += static_cast<std::int64_t>(v.size());
  };
  for (size_t b = 0; b < S; ++b) {
    const double m = p.memory[0][b];
    if (m + rest[1] <= budget) labels[0][b].push_back({p.node[0][b], m, -1, -1});
  }
  for (size_t i = 1; i < n; ++i) {
    for (size_t b = 0; b < S; ++b) {
      std::vector<Label>& here = labels[i][b];
      const double m = p.memory[i][b];
      for (size_t a = 0; a < S; ++a) {
        const double step = p.edge[i - 1][a * S + b] + p.node[i][b];
        const auto& from = labels[i - 1][a];
        for (size_t k = 0; k < from.size(); ++k) {
          const double mem = from[k].memory + m;
          if (mem + rest[i + 1] > budget) continue;
          here.push_back({from[k].cost + step, mem, static_cast<int>(a), static_cast<int>(k)});
        }
      }
      prune(here);
    }
  }
  int best_choice = -1, best_label = -1;
  double best = std::numeric_limits<double>::infinity();
  for (size_t b = 0; b < S; ++b) {
    const auto& v = labels[n - 1][b];
    for (size_t k = 0; k < v.size(); ++k) {
      if (v[k].cost < best) {
        best = v[k].cost;
        best_choice = static_cast<int>(b);
        best_label = static_cast<int>(k);
      }
    }
  }
  if (best_choice < 0) return absl::ResourceExhaustedError("no assignment of degrees fits in the memory budget");
  ChainSolution sol;
  sol.choice.assign(n, 0);
  sol.cost = best;
  sol.labels = kept;
  int c = best_choice, k = best_label;
  for (size_t i = n; i-- > 0;) {
    sol.choice[i] = c;
    const Label& l = labels[i][static_cast<size_t>(c)][static_cast<size_t>(k)];
    c = l.parent_choice;
    k = l.parent_label;
  }
  sol.memory = AssignmentMemory(p, sol.choice);
  return sol;
}

}  // namespace testbed::oases
