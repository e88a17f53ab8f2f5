#include "testbed/train/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace testbed::train {
namespace {

// Round-to-nearest-even of a float to bfloat16 (the upper 16 bits), back as a float.
float RoundBf16(float v, Rounding rounding, Rng* rng) {
  if (!std::isfinite(v)) return v;
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if (rounding == Rounding::kNearest) {
    u += 0x7fffu + ((u >> 16) & 1u);
  } else {
    // Adding a uniform 16-bit number and truncating rounds up with probability equal to the
    // dropped fraction.
    u += static_cast<std::uint32_t>(rng->Below(1u << 16));
  }
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

}  // namespace

bool SupportedBits(int bits) noexcept { return (bits >= 2 && bits <= 8) || bits == 16 || bits == 32; }

absl::Status CheckBits(int bits, const std::string& what) {
  if (SupportedBits(bits)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", bits, " bits; expected 2 to 8, 16 or 32"));
}

template <typename T>
T QuantStep(const Matrix<T>& x, int bits) noexcept {
  if (x.size() == 0) return T(0);
  const T lo = x.minCoeff(), hi = x.maxCoeff();
  if (lo >= T(0)) return hi / static_cast<T>((1 << bits) - 1);
  const T mag = std::max(-lo, hi);
  return mag / static_cast<T>((1 << (bits - 1)) - 1);
}

template <typename T>
Matrix<T> FakeQuantize(const Matrix<T>& x, int bits, Rounding rounding, Rng* rng) {
  if (bits >= 32) return x;
  Matrix<T> q(x.rows(), x.cols());
  const Eigen::Index n = x.size();
  const T* in = x.data();
  T* out = q.data();
  if (bits == 16) {
    for (Eigen::Index i = 0; i < n; ++i) {
      out[i] = static_cast<T>(RoundBf16(static_cast<float>(in[i]), rounding, rng));
    }
    return q;
  }
  const T step = QuantStep(x, bits);
  if (step == T(0)) return Matrix<T>::Zero(x.rows(), x.cols());
  const bool unsigned_grid = x.minCoeff() >= T(0);  // the grid QuantStep chose
  const T top = static_cast<T>(unsigned_grid ? (1 << bits) - 1 : (1 << (bits - 1)) - 1);
  const T bottom = unsigned_grid ? T(0) : -top;
  const T inv = T(1) / step;
  for (Eigen::Index i = 0; i < n; ++i) {
    const T v = in[i] * inv;
    T r = rounding == Rounding::kNearest ? std::round(v) : std::floor(v + static_cast<T>(rng->Uniform()));
    r = std::clamp(r, bottom, top);
    out[i] = r * step;
  }
  return q;
}

template float QuantStep(const Matrix<float>&, int) noexcept;
template double QuantStep(const Matrix<double>&, int) noexcept;
template Matrix<float> FakeQuantize(const Matrix<float>&, int, Rounding, Rng*);
template Matrix<double> FakeQuantize(const Matrix<double>&, int, Rounding, Rng*);

}  // namespace testbed::train
