// An array of trivially copyable elements that grows in place, for the schedule's tasks and
// dependencies (millions of entries, appended one at a time). std::vector's growth copies
// every element into a fresh buffer, which the kernel zeroes first: at 8,192 GPUs about half
// a gigabyte of a schedule's tasks was copied and zeroed again on the way to its final size.
// Here a buffer of 2 MiB or more is a mapping of its own, 2 MiB-aligned and on huge pages
// (huge_pages.h), and grows by moving its page tables to a larger aligned mapping (Linux
// mremap): nothing is copied or zeroed twice, and the huge pages stay whole. Smaller buffers,
// and every buffer off Linux, come from malloc and grow with realloc.
#pragma once

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>

namespace testbed {
namespace detail {
// A buffer of `new_bytes` holding the first `old_bytes` of `data` (from GrowBuffer, or null
// with `old_bytes` 0), which it replaces; throws std::bad_alloc when memory is exhausted, as
// std::vector does.
[[nodiscard]] void* GrowBuffer(void* data, std::size_t old_bytes, std::size_t new_bytes);
// Gives back a buffer of `bytes` from GrowBuffer (null: nothing).
void FreeBuffer(void* data, std::size_t bytes) noexcept;
}  // namespace detail

template <typename T>
class GrowArray {
  static_assert(std::is_trivially_copyable_v<T>, "GrowArray moves its elements as bytes");

 public:
  GrowArray() = default;
  GrowArray(std::initializer_list<T> init) { append(std::span<const T>(init.begin(), init.size())); }
  GrowArray(const GrowArray& o) { append(std::span<const T>(o.data_, o.size_)); }
  GrowArray(GrowArray&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
  GrowArray& operator=(GrowArray o) noexcept {
    swap(o);
    return *this;
  }
  ~GrowArray() { detail::FreeBuffer(data_, cap_ * sizeof(T)); }
  void swap(GrowArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return data_[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  [[nodiscard]] T* begin() noexcept { return data_; }
  [[nodiscard]] T* end() noexcept { return data_ + size_; }
  [[nodiscard]] const T* begin() const noexcept { return data_; }
  [[nodiscard]] const T* end() const noexcept { return data_ + size_; }
  [[nodiscard]] T& back() noexcept { return data_[size_ - 1]; }
  [[nodiscard]] const T& back() const noexcept { return data_[size_ - 1]; }

  // Room for `n` elements in all.
  void reserve(std::size_t n) {
    if (n <= cap_) return;
    data_ = static_cast<T*>(detail::GrowBuffer(data_, cap_ * sizeof(T), n * sizeof(T)));
    cap_ = n;
  }
  void push_back(const T& v) {
    if (size_ == cap_) Grow(1);
    data_[size_++] = v;
  }
  void append(std::span<const T> vs) {
    if (vs.empty()) return;
    if (size_ + vs.size() > cap_) Grow(vs.size());
    std::memcpy(data_ + size_, vs.data(), vs.size() * sizeof(T));
    size_ += vs.size();
  }
  // `n` copies of `value`, in place of what it held.
  void assign(std::size_t n, const T& value) {
    if (n > cap_) {  // nothing to keep: a fresh buffer rather than a copy of the old one
      GrowArray().swap(*this);
      reserve(n);
    }
    for (std::size_t i = 0; i < n; ++i) data_[i] = value;
    size_ = n;
  }

 private:
  // Room for `extra` more: twice the capacity, four times past 64 Ki elements (room never
  // written is address space only).
  void Grow(std::size_t extra) {
    const std::size_t factor = cap_ >= (std::size_t{1} << 16) ? 4 : 2;
    const std::size_t want = size_ + extra;
    const std::size_t grown = cap_ == 0 ? 16 : cap_ * factor;
    reserve(want > grown ? want : grown);
  }

  T* data_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
};

}  // namespace testbed
