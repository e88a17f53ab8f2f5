#include "quantizer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "codebook.h"
#include "element_rules.h"

namespace testbed::casq {
namespace {

struct Scan {
  std::int64_t nonzeros = 0;
  std::int64_t nonfinite = 0;
  float min_nonzero = std::numeric_limits<float>::infinity();
  float max_nonzero = -std::numeric_limits<float>::infinity();
};

// One pass: the bitmap of non-zeros, their count and range. NaN and infinities are non-zero,
// so they are caught while visiting the non-zeros.
Scan ScanGradient(std::span<const float> g, std::span<std::uint64_t> bitmap) {
  Scan s;
  const auto n = static_cast<std::int64_t>(g.size());
  for (std::int64_t w = 0; w < static_cast<std::int64_t>(bitmap.size()); ++w) {
    const std::int64_t base = 64 * w;
    const int count = static_cast<int>(std::min<std::int64_t>(64, n - base));
    std::uint64_t bits = 0;
    for (int j = 0; j < count; ++j) bits |= static_cast<std::uint64_t>(g[static_cast<std::size_t>(base + j)] != 0.0f) << j;
    bitmap[static_cast<std::size_t>(w)] = bits;
    s.nonzeros += std::popcount(bits);
    while (bits != 0) {
      const float v = g[static_cast<std::size_t>(base + std::countr_zero(bits))];
      bits &= bits - 1;
      if (!std::isfinite(v)) {
        ++s.nonfinite;
        continue;
      }
      s.min_nonzero = std::min(s.min_nonzero, v);
      s.max_nonzero = std::max(s.max_nonzero, v);
    }
  }
  return s;
}

// Calls f(position, index) for every coded value, positions counting from 0.
template <typename F>
void ForEachCoded(Positions positions, std::span<const std::uint64_t> bitmap, std::int64_t n, F&& f) {
  if (positions == Positions::kDense) {
    for (std::int64_t i = 0; i < n; ++i) f(i, i);
    return;
  }
  std::int64_t p = 0;
  for (std::size_t w = 0; w < bitmap.size(); ++w) {
    std::uint64_t bits = bitmap[w];
    while (bits != 0) {
      const std::int64_t i = 64 * static_cast<std::int64_t>(w) + std::countr_zero(bits);
      bits &= bits - 1;
      f(p++, i);
    }
  }
}

}  // namespace

EncodedRank EncodeRank(std::span<const float> gradient, const EncodeSettings& s) {
  EncodedRank out;
  const auto n = static_cast<std::int64_t>(gradient.size());
  std::vector<std::uint64_t> bitmap(static_cast<std::size_t>((n + 63) / 64));
  const Scan scan = ScanGradient(gradient, bitmap);
  if (scan.nonfinite > 0) {
    out.nonfinite = scan.nonfinite;
    return out;
  }
  const bool sparse = s.policy == PositionPolicy::kBitmap ||
                      (s.policy == PositionPolicy::kAuto && PreferBitmap(n, scan.nonzeros, s.bits));
  out.positions = sparse ? Positions::kBitmap : Positions::kDense;
  out.count = sparse ? scan.nonzeros : n;
  float lo = scan.min_nonzero, hi = scan.max_nonzero;
  if (!sparse && scan.nonzeros < n) {  // zeros are coded too
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
  }
  if (out.count == 0) lo = hi = 0.0f;
  const HistogramSpec spec = MakeHistogramSpec(lo, hi, s.histogram_bins);
  std::vector<std::int64_t> histogram(static_cast<std::size_t>(spec.bins), 0);
  ForEachCoded(out.positions, bitmap, n, [&](std::int64_t, std::int64_t i) {
    ++histogram[static_cast<std::size_t>(BinOf(gradient[static_cast<std::size_t>(i)], spec))];
  });
  const Codebook book = BuildCodebook(histogram, spec, {s.bits, s.clusters, s.kmeans_iterations});
  out.levels = book.levels;
  const int per_word = CodesPerWord(s.bits);
  out.codes.assign(static_cast<std::size_t>((out.count + per_word - 1) / per_word), 0);
  const float* levels = out.levels.data();
  const int count = static_cast<int>(out.levels.size());
  ForEachCoded(out.positions, bitmap, n, [&](std::int64_t p, std::int64_t i) {
    const float u = Uniform(s.stream, static_cast<std::uint64_t>(i));
    const auto code = static_cast<std::uint64_t>(RoundToLevel(gradient[static_cast<std::size_t>(i)], levels, count, u));
    out.codes[static_cast<std::size_t>(p / per_word)] |= code << (s.bits * (p % per_word));
  });
  if (sparse) out.bitmap = std::move(bitmap);
  return out;
}

void AccumulateRank(const RankView& rank, int bits, std::span<float> out) noexcept {
  const int per_word = CodesPerWord(bits);
  const std::uint64_t mask = (1ull << bits) - 1;
  ForEachCoded(rank.positions, rank.bitmap, static_cast<std::int64_t>(out.size()), [&](std::int64_t p, std::int64_t i) {
    const std::uint64_t code = (rank.codes[static_cast<std::size_t>(p / per_word)] >> (bits * (p % per_word))) & mask;
    out[static_cast<std::size_t>(i)] += rank.levels[static_cast<std::size_t>(code)];
  });
}

void DecodeRanks(std::span<const RankView> ranks, int bits, int divisor, std::span<float> out) noexcept {
  std::fill(out.begin(), out.end(), 0.0f);
  for (const RankView& r : ranks) AccumulateRank(r, bits, out);
  const auto d = static_cast<float>(divisor);
  for (float& v : out) v /= d;
}

}  // namespace testbed::casq
