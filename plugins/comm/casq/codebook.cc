#include "codebook.h"

#include <algorithm>
#include <cmath>

namespace testbed::casq {
namespace {

// Contiguous groups of non-empty bins; 1-D k-means keeps clusters contiguous, so a cluster is
// fully described by its first and one-past-last index into the non-empty bins.
struct Group {
  std::size_t begin;
  std::size_t end;
};

struct Bins {
  std::vector<double> centre;
  std::vector<double> weight;
};

double Mean(const Bins& b, const Group& g) {
  double w = 0, s = 0;
  for (std::size_t i = g.begin; i < g.end; ++i) {
    w += b.weight[i];
    s += b.weight[i] * b.centre[i];
  }
  return s / w;
}

// Values spread uniformly within their bin add width^2 / 12 to the variance of the centres.
double StdDev(const Bins& b, const Group& g, double mean, double width) {
  double w = 0, s = 0;
  for (std::size_t i = g.begin; i < g.end; ++i) {
    w += b.weight[i];
    s += b.weight[i] * (b.centre[i] - mean) * (b.centre[i] - mean);
  }
  return std::sqrt(s / w + width * width / 12.0);
}

// Equal-weight contiguous groups: the k-means starting point (weighted quantiles).
std::vector<Group> InitialGroups(const Bins& b, int k, double total) {
  std::vector<Group> groups;
  std::size_t begin = 0;
  double cumulative = 0;
  const std::size_t n = b.weight.size();
  for (int g = 0; g < k; ++g) {
    const std::size_t groups_left = static_cast<std::size_t>(k - g);
    std::size_t end = begin + 1;
    cumulative += b.weight[begin];
    const double target = total * static_cast<double>(g + 1) / k;
    // Grow while below this group's share, leaving one bin for each group after it.
    while (end < n - (groups_left - 1) && cumulative < target) cumulative += b.weight[end++];
    if (g == k - 1) {
      while (end < n) cumulative += b.weight[end++];
    }
    groups.push_back({begin, end});
    begin = end;
  }
  return groups;
}

// Lloyd's iteration in one dimension: with sorted centroids, a bin belongs to the nearest,
// so boundaries sit at midpoints between neighbouring centroids (ties go to the lower group).
std::vector<Group> Lloyd(const Bins& b, std::vector<Group> groups, int iterations) {
  for (int it = 0; it < iterations; ++it) {
    std::vector<double> means;
    for (const Group& g : groups) means.push_back(Mean(b, g));
    std::vector<Group> next;
    std::size_t g = 0, begin = 0;
    for (std::size_t i = 0; i < b.centre.size(); ++i) {
      std::size_t target = g;
      while (target + 1 < means.size() && b.centre[i] > 0.5 * (means[target] + means[target + 1])) ++target;
      if (target != g) {
        if (i > begin) next.push_back({begin, i});
        begin = i;
        g = target;
      }
    }
    next.push_back({begin, b.centre.size()});
    bool same = next.size() == groups.size();
    for (std::size_t j = 0; same && j < next.size(); ++j) same = next[j].begin == groups[j].begin && next[j].end == groups[j].end;
    groups = std::move(next);
    if (same) break;
  }
  return groups;
}

}  // namespace

HistogramSpec MakeHistogramSpec(float lo, float hi, int bins) {
  HistogramSpec h;
  h.lo = lo;
  h.hi = hi;
  h.bins = std::max(1, bins);
  const float range = hi - lo;
  h.scale = (range > 0.0f && std::isfinite(range)) ? static_cast<float>(h.bins) / range : 0.0f;
  return h;
}

std::vector<int> AllocateLevels(const std::vector<Cluster>& clusters, int total) {
  const std::size_t k = clusters.size();
  std::vector<int> levels(k, 0);
  if (k == 0) return levels;
  std::vector<double> score(k);
  double sum = 0;
  for (std::size_t c = 0; c < k; ++c) {
    const double sd = clusters[c].stddev;
    score[c] = std::cbrt(static_cast<double>(clusters[c].count) * sd * sd);
    sum += score[c];
  }
  if (!(sum > 0)) {  // no spread anywhere: share by count
    sum = 0;
    for (std::size_t c = 0; c < k; ++c) sum += score[c] = static_cast<double>(std::max<std::int64_t>(clusters[c].count, 1));
  }
  const int spare = total - static_cast<int>(k);
  std::vector<double> ideal(k);
  int given = 0;
  for (std::size_t c = 0; c < k; ++c) {
    ideal[c] = 1.0 + spare * score[c] / sum;
    levels[c] = static_cast<int>(std::floor(ideal[c]));
    given += levels[c];
  }
  // Largest remainders first; stable, so ties go to the lower cluster.
  std::vector<std::size_t> order(k);
  for (std::size_t c = 0; c < k; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ideal[a] - levels[a] > ideal[b] - levels[b]; });
  for (std::size_t j = 0; given < total; j = (j + 1) % k, ++given) ++levels[order[j]];
  return levels;
}

Codebook BuildCodebook(const std::vector<std::int64_t>& histogram, const HistogramSpec& spec,
                       const CodebookParams& params) {
  const int total_levels = 1 << params.bits;
  Codebook book;
  if (params.uniform) {
    for (int i = 0; i < total_levels; ++i) {
      const double f = total_levels > 1 ? static_cast<double>(i) / (total_levels - 1) : 0.0;
      book.levels.push_back(static_cast<float>(spec.lo + f * (static_cast<double>(spec.hi) - spec.lo)));
    }
    return book;
  }
  Bins bins;
  std::vector<int> bin_index;
  double total = 0;
  const double width = spec.scale > 0.0f ? (static_cast<double>(spec.hi) - spec.lo) / spec.bins : 0.0;
  for (std::size_t b = 0; b < histogram.size(); ++b) {
    if (histogram[b] == 0) continue;
    bins.centre.push_back(spec.lo + (static_cast<double>(b) + 0.5) * width);
    bins.weight.push_back(static_cast<double>(histogram[b]));
    bin_index.push_back(static_cast<int>(b));
    total += static_cast<double>(histogram[b]);
  }
  if (bins.centre.empty()) {
    book.levels.assign(static_cast<std::size_t>(total_levels), 0.0f);
    return book;
  }
  const int k = std::min<int>(params.clusters, static_cast<int>(bins.centre.size()));
  const std::vector<Group> groups = Lloyd(bins, InitialGroups(bins, k, total), params.kmeans_iterations);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    Cluster c;
    for (std::size_t i = groups[g].begin; i < groups[g].end; ++i) c.count += static_cast<std::int64_t>(bins.weight[i]);
    c.mean = Mean(bins, groups[g]);
    c.stddev = StdDev(bins, groups[g], c.mean, width);
    c.lo = g == 0 ? spec.lo : spec.lo + bin_index[groups[g].begin] * width;
    c.hi = g + 1 == groups.size() ? spec.hi : spec.lo + (bin_index[groups[g].end - 1] + 1) * width;
    book.clusters.push_back(c);
  }
  const std::vector<int> share = AllocateLevels(book.clusters, total_levels);
  std::vector<double> levels;
  for (std::size_t c = 0; c < book.clusters.size(); ++c) {
    Cluster& cl = book.clusters[c];
    cl.levels = share[c];
    if (cl.levels == 1) {
      levels.push_back(cl.mean);
    } else {
      // Where the cluster's values are: its range reaches as far as the k-means boundary, which
      // far-away neighbours push well beyond the cluster's mass.
      const double a = std::max(cl.lo, cl.mean - 2 * cl.stddev);
      const double z = std::min(cl.hi, cl.mean + 2 * cl.stddev);
      for (int j = 0; j < cl.levels; ++j) levels.push_back(a + (z - a) * j / (cl.levels - 1));
    }
  }
  std::sort(levels.begin(), levels.end());
  book.levels.resize(levels.size());
  for (std::size_t j = 0; j < levels.size(); ++j) book.levels[j] = static_cast<float>(levels[j]);
  // The extreme levels are the exact extremes, so every value has a level on each side and
  // stochastic rounding stays unbiased.
  book.levels.front() = spec.lo;
  book.levels.back() = spec.hi;
  std::sort(book.levels.begin(), book.levels.end());
  return book;
}

}  // namespace testbed::casq
