#include "piper_planner.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace testbed::piper {

absl::StatusOr<PiperPlan> PlanPiper(const std::vector<Unit>& units, const Environment& env) {
  const int n = static_cast<int>(units.size());
  const int pp = env.pp;
  if (pp < 1 || pp > n) return absl::InvalidArgumentError(absl::StrCat("cannot split ", n, " layers into ", pp, " stages"));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // dp[k][j]: the first j units as stages 0..k-1; from[k][j]: where stage k-1 starts.
  std::vector<std::vector<double>> dp(static_cast<size_t>(pp) + 1, std::vector<double>(static_cast<size_t>(n) + 1, kInf));
  std::vector<std::vector<int>> from(static_cast<size_t>(pp) + 1, std::vector<int>(static_cast<size_t>(n) + 1, -1));
  std::vector<std::vector<char>> rec(static_cast<size_t>(pp) + 1, std::vector<char>(static_cast<size_t>(n) + 1, 0));
  dp[0][0] = 0;
  PiperPlan out;
  for (int k = 1; k <= pp; ++k) {
    for (int j = k; j <= n - (pp - k); ++j) {
      for (int i = k - 1; i < j; ++i) {
        if (dp[static_cast<size_t>(k - 1)][static_cast<size_t>(i)] == kInf) continue;
        const StageChoice c = CostStage(units, i, j, k - 1, env);
        ++out.evaluated;
        const double v = std::max(dp[static_cast<size_t>(k - 1)][static_cast<size_t>(i)], c.load);
        if (v < dp[static_cast<size_t>(k)][static_cast<size_t>(j)]) {
          dp[static_cast<size_t>(k)][static_cast<size_t>(j)] = v;
          from[static_cast<size_t>(k)][static_cast<size_t>(j)] = i;
          rec[static_cast<size_t>(k)][static_cast<size_t>(j)] = c.recompute;
        }
      }
    }
  }
  if (dp[static_cast<size_t>(pp)][static_cast<size_t>(n)] == kInf) {
    return absl::ResourceExhaustedError(absl::StrCat("piper: no split of ", n, " layers into ", pp,
                                                     " stages fits in memory, even with recomputation"));
  }
  out.max_load = dp[static_cast<size_t>(pp)][static_cast<size_t>(n)];
  out.counts.assign(static_cast<size_t>(pp), 0);
  out.recompute.assign(static_cast<size_t>(pp), false);
  for (int k = pp, j = n; k > 0; --k) {
    const int i = from[static_cast<size_t>(k)][static_cast<size_t>(j)];
    out.counts[static_cast<size_t>(k - 1)] = j - i;
    out.recompute[static_cast<size_t>(k - 1)] = rec[static_cast<size_t>(k)][static_cast<size_t>(j)] != 0;
    j = i;
  }
  return out;
}

}  // namespace testbed::piper
