// Integrity of a results file, checked before the HDF5 library reads a byte of it (a corrupt
// file can crash that library). Every write ends the file with a 32-byte seal:
//   "testbed-seal-v1\0"  (16 bytes)
//   length               (8 bytes, little-endian: the bytes before the seal)
//   checksum             (8 bytes: a multiply-xor hash over 8-byte words of those bytes,
//                         so any change to one word is always detected)
// HDF5 ignores bytes after its end of allocation, so a sealed file is still an ordinary HDF5
// file for h5py and other readers. A file without a seal (written before seals, or whose seal
// itself was damaged) is read in a child process, which writes a fresh sealed copy of what it
// read for this process to read: a crash there is an error here, and memory the HDF5 library
// corrupted while reading it is the child's, not ours.
#pragma once

#include <cstdint>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"

namespace testbed::results {

inline constexpr std::size_t kSealBytes = 32;

// The checksum of `size` bytes.
[[nodiscard]] std::uint64_t Checksum(const unsigned char* data, std::size_t size) noexcept;

// Appends the seal of the file's current contents.
[[nodiscard]] absl::Status Seal(const std::filesystem::path& path);

// What a file's seal says: kSealed (contents match it), kUnsealed (no seal), or an error
// (DataLoss: a seal whose length or checksum does not match the contents).
enum class SealState { kSealed, kUnsealed };
[[nodiscard]] absl::StatusOr<SealState> CheckSeal(const std::filesystem::path& path);

// Removes a valid seal (before the HDF5 library extends a copy of the file).
[[nodiscard]] absl::Status Unseal(const std::filesystem::path& path);

}  // namespace testbed::results
