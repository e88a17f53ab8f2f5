#include "bit_or.h"

namespace testbed::nccl {
namespace {

template <typename U>
__global__ void BitOrKernel(const U* gathered, U* out, std::int64_t count, std::int64_t stride, std::int64_t offset,
                            int members) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  U acc = 0;
  for (int k = 0; k < members; ++k) acc |= gathered[k * stride + offset + i];
  out[i] = acc;
}

template <typename U>
int Launch(const void* gathered, void* out, std::int64_t count, std::int64_t stride, std::int64_t offset, int members,
           cudaStream_t stream) {
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  (void)cudaGetLastError();  // report this launch's error, not an earlier one left on the thread
  BitOrKernel<U><<<blocks, kThreads, 0, stream>>>(static_cast<const U*>(gathered), static_cast<U*>(out), count, stride,
                                                  offset, members);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchBitOr(const void* gathered, void* out, std::int64_t count, std::int64_t stride, std::int64_t offset,
                int members, int element_bytes, cudaStream_t stream) noexcept {
  if (count <= 0) return 0;
  switch (element_bytes) {
    case 1: return Launch<unsigned char>(gathered, out, count, stride, offset, members, stream);
    case 4: return Launch<unsigned int>(gathered, out, count, stride, offset, members, stream);
    case 8: return Launch<unsigned long long>(gathered, out, count, stride, offset, members, stream);
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace testbed::nccl
