// The routing parameters every load balancer declares, and the synthetic routing generator
// (testbed/load_balancer.h): Zipf-distributed expert popularity in a per-layer random order,
// a log-normal preference per (rank, expert), and a Gaussian random walk of the
// log-popularities across iterations.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "testbed/load_balancer.h"
#include "testbed/status_macros.h"

namespace testbed {

std::vector<ParamSpec> MoeRoutingParams() {
  return {
      ParamSpec::String("routing", "synthetic")
          .Doc("where each iteration's tokens per expert come from: even (spread evenly), synthetic (skew, "
               "rank_spread, drift, routing_seed) or an HDF5 routing trace file (dataset \"tokens\", iterations x "
               "MoE layers x ranks x experts)"),
      ParamSpec::Double("skew", 1.0).Range(0, 8).Unit("1")
          .Doc("synthetic: Zipf exponent of expert popularity (0: every expert equally popular)"),
      ParamSpec::Double("rank_spread", 0.5).Range(0, 8).Unit("1")
          .Doc("synthetic: standard deviation of the log-normal factor by which each rank's tokens prefer each expert"),
      ParamSpec::Double("drift", 0.05).Range(0, 8).Unit("1")
          .Doc("synthetic: standard deviation of the per-iteration Gaussian step of each expert's log-popularity"),
      ParamSpec::Int("routing_seed", 1).Range(0, 1LL << 62).Doc("synthetic: the generator's seed"),
      ParamSpec::Double("capacity_factor", 0).Range(0, 1e6).Unit("1")
          .Doc("tokens an expert takes per rank and micro-batch, in units of the even share (tokens x top_k / "
               "experts); the rest is dropped. 0: dropless"),
  };
}

absl::StatusOr<MoeRouting> MoeRoutingFrom(const ParamSet& params, const std::string& owner) {
  ParamReader read(params, owner);
  MoeRouting r;
  r.routing = read.Get<std::string>("routing");
  r.skew = read.Get<double>("skew");
  r.rank_spread = read.Get<double>("rank_spread");
  r.drift = read.Get<double>("drift");
  r.seed = static_cast<std::uint64_t>(read.Get<std::int64_t>("routing_seed"));
  r.capacity_factor = read.Get<double>("capacity_factor");
  TESTBED_RETURN_IF_ERROR(read.status());
  if (r.routing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(owner, ".routing: empty; expected even, synthetic or a trace file"));
  }
  return r;
}

namespace {

std::uint64_t Mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x7F4A7C159E3779B9ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Scales `w` (non-negative, positive sum) to sum to `total` with no entry above `cap`
// (cap x entries >= total), moving what a capped entry would exceed to the others in
// proportion to their weights.
std::vector<double> CappedShares(std::vector<double> w, double total, double cap) {
  std::vector<double> out(w.size(), 0.0);
  std::vector<bool> fixed(w.size(), false);
  double left = total;
  for (size_t round = 0; round <= w.size(); ++round) {
    double sum = 0;
    for (size_t i = 0; i < w.size(); ++i) sum += fixed[i] ? 0.0 : w[i];
    if (sum <= 0) break;
    bool capped = false;
    for (size_t i = 0; i < w.size(); ++i) {
      if (fixed[i]) continue;
      out[i] = left * w[i] / sum;
      if (out[i] > cap) capped = true;
    }
    if (!capped) return out;
    for (size_t i = 0; i < w.size(); ++i) {
      if (!fixed[i] && out[i] > cap) {
        fixed[i] = true;
        out[i] = cap;
        left -= cap;
      }
    }
  }
  return out;
}

}  // namespace

Routing SyntheticRouting(const MoeRouting& routing, int moe_index, int iteration, int ranks, int experts,
                         double tokens_per_rank, int top_k) {
  std::mt19937_64 layer_rng(Mix(routing.seed, static_cast<std::uint64_t>(moe_index)));
  std::normal_distribution<double> normal(0.0, 1.0);
  // Popularity: Zipf over a random order of the experts.
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), layer_rng);
  std::vector<double> log_pop(static_cast<size_t>(experts));
  for (int i = 0; i < experts; ++i) {
    log_pop[static_cast<size_t>(order[static_cast<size_t>(i)])] = -routing.skew * std::log(static_cast<double>(i + 1));
  }
  std::vector<double> prefer(static_cast<size_t>(ranks) * static_cast<size_t>(experts));
  for (double& p : prefer) p = routing.rank_spread * normal(layer_rng);
  // The drift: one step per iteration up to this one, from a stream of its own.
  std::mt19937_64 drift_rng(Mix(Mix(routing.seed, static_cast<std::uint64_t>(moe_index)), 0xD1F7ull));
  for (int t = 0; t < iteration; ++t) {
    for (double& lp : log_pop) lp += routing.drift * normal(drift_rng);
  }
  Routing r;
  r.ranks = ranks;
  r.experts = experts;
  r.tokens.assign(static_cast<size_t>(ranks) * static_cast<size_t>(experts), 0.0);
  const int k = std::clamp(top_k, 1, std::max(1, experts));
  for (int src = 0; src < ranks; ++src) {
    std::vector<double> w(static_cast<size_t>(experts));
    double top = -1e300;
    for (int e = 0; e < experts; ++e) {
      const double lw = log_pop[static_cast<size_t>(e)] + prefer[static_cast<size_t>(src) * static_cast<size_t>(experts) + static_cast<size_t>(e)];
      w[static_cast<size_t>(e)] = lw;
      top = std::max(top, lw);
    }
    for (double& x : w) x = std::exp(x - top);
    const std::vector<double> share = CappedShares(std::move(w), tokens_per_rank * k, tokens_per_rank);
    for (int e = 0; e < experts; ++e) {
      r.tokens[static_cast<size_t>(src) * static_cast<size_t>(experts) + static_cast<size_t>(e)] = share[static_cast<size_t>(e)];
    }
  }
  return r;
}

}  // namespace testbed
