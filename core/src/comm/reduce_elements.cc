#include "testbed/reduce_elements.h"

#include <algorithm>
#include <type_traits>

namespace testbed {
namespace {

template <typename T>
void ReduceTyped(T* __restrict dst, const T* __restrict src, std::int64_t n, ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum:
      if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
        using U = std::make_unsigned_t<T>;
        for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(static_cast<U>(dst[i]) + static_cast<U>(src[i]));
      } else {
        for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] + src[i]);
      }
      return;
    case ReduceOp::kMax:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      return;
    case ReduceOp::kMin:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      return;
    case ReduceOp::kBitOr:
      if constexpr (std::is_unsigned_v<T>) {
        for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] | src[i]);
      }
      return;
  }
}

}  // namespace

void ReduceElements(void* dst, const void* src, std::int64_t count, DataType type, ReduceOp op) noexcept {
  switch (type) {
    case DataType::kFloat32:
      return ReduceTyped(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
    case DataType::kFloat64:
      return ReduceTyped(static_cast<double*>(dst), static_cast<const double*>(src), count, op);
    case DataType::kInt32:
      return ReduceTyped(static_cast<std::int32_t*>(dst), static_cast<const std::int32_t*>(src), count, op);
    case DataType::kInt64:
      return ReduceTyped(static_cast<std::int64_t*>(dst), static_cast<const std::int64_t*>(src), count, op);
    case DataType::kUInt8:
      return ReduceTyped(static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), count, op);
    case DataType::kUInt32:
      return ReduceTyped(static_cast<std::uint32_t*>(dst), static_cast<const std::uint32_t*>(src), count, op);
    case DataType::kUInt64:
      return ReduceTyped(static_cast<std::uint64_t*>(dst), static_cast<const std::uint64_t*>(src), count, op);
  }
}

}  // namespace testbed
