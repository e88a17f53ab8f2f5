// One rank's CASQ encoding: which positions are coded, the codebook, and the packed codes.
// Produced by the CPU encoder and its CUDA twin alike. Plain C++17: nvcc includes it.
#pragma once

#include <cstdint>
#include <vector>

namespace testbed::casq {

// Which values get a code: every value (dense), or only the non-zeros, located by a bitmap.
enum class Positions : std::uint8_t { kDense = 0, kBitmap = 1 };
enum class PositionPolicy : std::uint8_t { kAuto, kDense, kBitmap };

struct EncodedRank {
  Positions positions = Positions::kDense;
  std::int64_t count = 0;             // values coded: n (dense) or the non-zeros (bitmap)
  std::vector<float> levels;          // the codebook, 2^bits sorted levels
  std::vector<std::uint64_t> bitmap;  // (n + 63) / 64 words with Positions::kBitmap, else empty
  std::vector<std::uint64_t> codes;   // ceil(count / CodesPerWord(bits)) words
  std::int64_t nonfinite = 0;         // non-finite values seen; when > 0 nothing else is set
};

struct EncodeSettings {
  bool uniform = false;  // evenly spaced levels instead of the cluster-aware codebook
  int bits = 2;
  int clusters = 4;
  int kmeans_iterations = 20;
  int histogram_bins = 1024;
  PositionPolicy policy = PositionPolicy::kAuto;
  std::uint64_t stream = 0;  // StreamKey(seed, rank, step)
};

// Bitmap when it makes the payload smaller: bitmap words plus the non-zeros' code words
// against the code words of every value.
inline bool PreferBitmap(std::int64_t n, std::int64_t nonzeros, int bits) {
  const std::int64_t per_word = 64 / bits;
  const std::int64_t dense = (n + per_word - 1) / per_word;
  const std::int64_t sparse = (n + 63) / 64 + (nonzeros + per_word - 1) / per_word;
  return sparse < dense;
}

}  // namespace testbed::casq
