// Where the conformance checks put their buffers: host memory for the local and mpi
// communicators, GPU memory for nccl. The checks fill and read buffers through this, so the
// same checks run against every communicator.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace testbed::testing {

class BufferSpace {
 public:
  virtual ~BufferSpace() = default;
  [[nodiscard]] virtual void* Allocate(std::size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  virtual void Upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void Download(void* dst, const void* src, std::size_t bytes) = 0;
};

class HostSpace final : public BufferSpace {
 public:
  [[nodiscard]] void* Allocate(std::size_t bytes) override { return std::malloc(bytes == 0 ? 1 : bytes); }
  void Free(void* p) override { std::free(p); }
  // memcpy must not see a null pointer, even for zero bytes (an empty vector's data()).
  void Upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void Download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
};

// A buffer of `n` elements of T in a BufferSpace.
template <typename T>
class SpaceBuffer {
 public:
  SpaceBuffer(BufferSpace& space, std::size_t n) : space_(space), n_(n), p_(space.Allocate(n * sizeof(T))) {}
  SpaceBuffer(BufferSpace& space, const std::vector<T>& values) : SpaceBuffer(space, values.size()) { Set(values); }
  ~SpaceBuffer() { space_.Free(p_); }
  SpaceBuffer(const SpaceBuffer&) = delete;
  SpaceBuffer& operator=(const SpaceBuffer&) = delete;

  void Set(const std::vector<T>& values) { space_.Upload(p_, values.data(), values.size() * sizeof(T)); }
  [[nodiscard]] std::vector<T> Get() const {
    std::vector<T> out(n_);
    space_.Download(out.data(), p_, n_ * sizeof(T));
    return out;
  }
  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(p_); }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }

 private:
  BufferSpace& space_;
  std::size_t n_;
  void* p_;
};

}  // namespace testbed::testing
