// CASQ's cluster-aware codebook, built from a histogram of the values: 1-D k-means over the
// histogram bins finds clusters of the (non-uniform) value distribution; the 2^bits
// quantisation buckets are shared out among clusters by their statistics (count and spread);
// a cluster's buckets are levels at its mean, or spread over mean +- 2 standard deviations.
// Host code used by both the CPU and the CUDA encoder (plain C++17 header: nvcc includes it).
#pragma once

#include <cstdint>
#include <vector>

#include "element_rules.h"

namespace testbed::casq {

struct CodebookParams {
  int bits = 2;                // levels = 2^bits
  int clusters = 4;            // k of the k-means, at most 2^bits
  int kmeans_iterations = 20;  // Lloyd iterations at most (stops earlier when stable)
  // The baseline CASQ is measured against: 2^bits levels evenly spaced from the minimum to
  // the maximum, ignoring the distribution (no clustering).
  bool uniform = false;
};

struct Cluster {
  std::int64_t count = 0;  // values in the cluster
  double lo = 0;           // its range: edges of its first and last non-empty bins
  double hi = 0;           //   (the global minimum and maximum at the ends)
  double mean = 0;
  double stddev = 0;       // from the histogram, bins' own width included
  int levels = 0;          // buckets it was given
};

struct Codebook {
  std::vector<float> levels;      // 2^bits values, sorted; first = minimum, last = maximum
  std::vector<Cluster> clusters;  // in increasing order of value
};

// `spec` over [lo, hi], where lo and hi are the exact minimum and maximum of the values that
// were counted into `histogram` (spec.bins entries). With no values the levels are all zero.
[[nodiscard]] HistogramSpec MakeHistogramSpec(float lo, float hi, int bins);
[[nodiscard]] Codebook BuildCodebook(const std::vector<std::int64_t>& histogram, const HistogramSpec& spec,
                                     const CodebookParams& params);

// How many levels each cluster gets: every cluster at least one, the rest in proportion to
// (count * stddev^2)^(1/3), largest remainders first. With a cluster's levels spaced in
// proportion to its spread, that share minimises the summed squared rounding error,
// sum_c count_c * (stddev_c / levels_c)^2, for a fixed total (the Panter-Dite allocation).
[[nodiscard]] std::vector<int> AllocateLevels(const std::vector<Cluster>& clusters, int total);

}  // namespace testbed::casq
