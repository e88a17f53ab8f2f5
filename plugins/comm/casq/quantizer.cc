#include "quantizer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "codebook.h"
#include "element_rules.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace testbed::casq {
namespace {

// The bitmap word of up to 64 consecutive values; SSE2 for full words (see the S2Reducer
// codec: NaN counts as non-zero, -0.0 as zero).
std::uint64_t NonZeroMask(const float* g, int count) noexcept {
  std::uint64_t bits = 0;
#if defined(__SSE2__)
  if (count == 64) {
    const __m128 zero = _mm_setzero_ps();
    for (int j = 0; j < 64; j += 4) {
      const auto m = static_cast<unsigned>(_mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(g + j), zero)));
      bits |= static_cast<std::uint64_t>(m) << j;
    }
    return bits;
  }
#endif
  for (int j = 0; j < count; ++j) bits |= static_cast<std::uint64_t>(g[j] != 0.0f) << j;
  return bits;
}

struct Scan {
  std::int64_t nonzeros = 0;
  std::int64_t nonfinite = 0;
  float min_nonzero = std::numeric_limits<float>::infinity();
  float max_nonzero = -std::numeric_limits<float>::infinity();
};

inline bool Finite(float v) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x7f800000u) != 0x7f800000u;
}

// One pass: the bitmap of non-zeros, their count and range. NaN and infinities are non-zero,
// so they are caught while visiting the non-zeros. Words with no zero (dense gradients) take
// a branch-free path; the others visit their set bits.
Scan ScanGradient(std::span<const float> g, std::span<std::uint64_t> bitmap) {
  Scan s;
  float lo = s.min_nonzero, hi = s.max_nonzero;
  const auto n = static_cast<std::int64_t>(g.size());
  for (std::int64_t w = 0; w < static_cast<std::int64_t>(bitmap.size()); ++w) {
    const std::int64_t base = 64 * w;
    const float* x = g.data() + base;
    const int count = static_cast<int>(std::min<std::int64_t>(64, n - base));
    std::uint64_t bits = NonZeroMask(x, count);
    bitmap[static_cast<std::size_t>(w)] = bits;
    if (bits == ~0ull) {
      s.nonzeros += 64;
      float wlo = x[0], whi = x[0];
      int bad = 0;
      for (int j = 0; j < 64; ++j) {
        wlo = x[j] < wlo ? x[j] : wlo;
        whi = x[j] > whi ? x[j] : whi;
        bad |= !Finite(x[j]);
      }
      if (bad != 0) {
        for (int j = 0; j < 64; ++j) s.nonfinite += !Finite(x[j]);
        continue;
      }
      lo = std::min(lo, wlo);
      hi = std::max(hi, whi);
      continue;
    }
    while (bits != 0) {
      const float v = x[std::countr_zero(bits)];
      bits &= bits - 1;
      ++s.nonzeros;
      if (!Finite(v)) {
        ++s.nonfinite;
        continue;
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  s.min_nonzero = lo;
  s.max_nonzero = hi;
  return s;
}

// Calls f(index) for every coded value, in position order.
template <typename F>
void ForEachCoded(Positions positions, std::span<const std::uint64_t> bitmap, std::int64_t n, F&& f) {
  if (positions == Positions::kDense) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  for (std::size_t w = 0; w < bitmap.size(); ++w) {
    std::uint64_t bits = bitmap[w];
    while (bits != 0) {
      const std::int64_t i = 64 * static_cast<std::int64_t>(w) + std::countr_zero(bits);
      bits &= bits - 1;
      f(i);
    }
  }
}

// Packs codes into consecutive words, filling each in a register (no division per value).
class CodeWriter {
 public:
  CodeWriter(std::uint64_t* words, int bits) : words_(words), bits_(bits), per_word_(CodesPerWord(bits)) {}
  void Put(std::uint64_t code) noexcept {
    word_ |= code << (bits_ * slot_);
    if (++slot_ == per_word_) Flush();
  }
  void Flush() noexcept {
    if (slot_ == 0) return;
    *words_++ = word_;
    word_ = 0;
    slot_ = 0;
  }

 private:
  std::uint64_t* words_;
  int bits_;
  int per_word_;
  int slot_ = 0;
  std::uint64_t word_ = 0;
};

class CodeReader {
 public:
  CodeReader(const std::uint64_t* words, int bits)
      : words_(words), bits_(bits), per_word_(CodesPerWord(bits)), mask_((1ull << bits) - 1) {}
  std::uint64_t Next() noexcept {
    if (slot_ == 0) word_ = *words_++;
    const std::uint64_t code = word_ & mask_;
    word_ >>= bits_;
    if (++slot_ == per_word_) slot_ = 0;
    return code;
  }

 private:
  const std::uint64_t* words_;
  int bits_;
  int per_word_;
  std::uint64_t mask_;
  int slot_ = 0;
  std::uint64_t word_ = 0;
};

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
  ForEachCoded(out.positions, bitmap, n, [&](std::int64_t i) {
    ++histogram[static_cast<std::size_t>(BinOf(gradient[static_cast<std::size_t>(i)], spec))];
  });
  const Codebook book = BuildCodebook(histogram, spec, {s.bits, s.clusters, s.kmeans_iterations, s.uniform});
  out.levels = book.levels;
  const int per_word = CodesPerWord(s.bits);
  out.codes.assign(static_cast<std::size_t>((out.count + per_word - 1) / per_word), 0);
  const float* levels = out.levels.data();
  const int count = static_cast<int>(out.levels.size());
  CodeWriter writer(out.codes.data(), s.bits);
  ForEachCoded(out.positions, bitmap, n, [&](std::int64_t i) {
    const float u = Uniform(s.stream, static_cast<std::uint64_t>(i));
    writer.Put(static_cast<std::uint64_t>(RoundToLevel(gradient[static_cast<std::size_t>(i)], levels, count, u)));
  });
  writer.Flush();
  if (sparse) out.bitmap = std::move(bitmap);
  return out;
}

void AccumulateRank(const RankView& rank, int bits, std::span<float> out) noexcept {
  if (rank.count == 0) return;
  CodeReader reader(rank.codes.data(), bits);
  const float* levels = rank.levels.data();
  ForEachCoded(rank.positions, rank.bitmap, static_cast<std::int64_t>(out.size()),
               [&](std::int64_t i) { out[static_cast<std::size_t>(i)] += levels[reader.Next()]; });
}

void DecodeRanks(std::span<const RankView> ranks, int bits, int divisor, std::span<float> out) noexcept {
  std::fill(out.begin(), out.end(), 0.0f);
  for (const RankView& r : ranks) AccumulateRank(r, bits, out);
  const auto d = static_cast<float>(divisor);
  for (float& v : out) v /= d;
}

}  // namespace testbed::casq
