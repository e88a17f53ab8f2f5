// CUDA twins of EncodeRank and DecodeRanks (quantizer.h). The histogram, the codebook (built
// on the host by the same code), the random numbers and the rounding are the same as on the
// CPU, so payloads and decoded values are equal bit for bit. Host buffers in and out. Built
// only with CUDA (then TESTBED_CASQ_HAS_CUDA is defined). Plain C++17 for nvcc.
#pragma once

#include <cstdint>
#include <string>

#include "encoded_rank.h"

namespace testbed::casq {

// False when the CUDA runtime reports any error (no driver, no device): callers skip.
[[nodiscard]] bool CudaDeviceAvailable() noexcept;

// As EncodeRank. Returns "" on success, else what failed.
[[nodiscard]] std::string EncodeRankCuda(const float* gradient, std::int64_t n, const EncodeSettings& settings,
                                         EncodedRank* out);

// One rank's validated payload, as raw pointers.
struct RankPointers {
  Positions positions;
  std::int64_t count;
  const float* levels;  // 2^bits
  const std::uint64_t* bitmap;
  std::int64_t bitmap_words;  // 0 for Positions::kDense
  const std::uint64_t* codes;
  std::int64_t code_words;
};

// As DecodeRanks. Returns "" on success, else what failed.
[[nodiscard]] std::string DecodeRanksCuda(const RankPointers* ranks, int rank_count, std::int64_t n, int bits,
                                          int divisor, float* out);

}  // namespace testbed::casq
