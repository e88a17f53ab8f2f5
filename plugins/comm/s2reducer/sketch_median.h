// Median of a row's worth of estimates, shared by the CPU decoder and the CUDA kernel so that
// both return bit-identical values for the same sketch. Plain C++17: nvcc includes it.
#pragma once

#include "s2reducer_hash.h"

namespace testbed::s2reducer {

// Sorts v[0..n) (n <= kMaxRows, so insertion sort beats anything clever) and returns the
// middle value, or the mean of the two middle values for even n.
S2R_HOST_DEVICE float MedianInPlace(float* v, int n) {
  for (int i = 1; i < n; ++i) {
    const float x = v[i];
    int j = i - 1;
    while (j >= 0 && v[j] > x) {
      v[j + 1] = v[j];
      --j;
    }
    v[j + 1] = x;
  }
  const int m = n / 2;
  return (n % 2 == 1) ? v[m] : 0.5f * (v[m - 1] + v[m]);
}

}  // namespace testbed::s2reducer
