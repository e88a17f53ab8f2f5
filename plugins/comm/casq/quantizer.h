// CASQ on the CPU: encode one rank's gradient (scan, histogram, cluster-aware codebook,
// stochastic rounding, packing) and add a rank's decoded values into a dense output.
#pragma once

#include <cstdint>
#include <span>

#include "encoded_rank.h"

namespace testbed::casq {

[[nodiscard]] EncodedRank EncodeRank(std::span<const float> gradient, const EncodeSettings& settings);

// A rank's payload as decode reads it (already validated by the caller).
struct RankView {
  Positions positions = Positions::kDense;
  std::int64_t count = 0;
  std::span<const float> levels;
  std::span<const std::uint64_t> bitmap;
  std::span<const std::uint64_t> codes;
};

// out[i] += levels[code of i] at every coded position i.
void AccumulateRank(const RankView& rank, int bits, std::span<float> out) noexcept;

// out = (sum over ranks, in rank order, of each rank's decoded values) / divisor.
void DecodeRanks(std::span<const RankView> ranks, int bits, int divisor, std::span<float> out) noexcept;

}  // namespace testbed::casq
