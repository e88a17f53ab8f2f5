#include "results/file_seal.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace testbed::results {
namespace {

constexpr char kMagic[16] = "testbed-seal-v1";  // 15 characters and the terminating zero

absl::StatusOr<std::vector<unsigned char>> ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open: ", std::strerror(errno)));
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat(path.string(), ": cannot read: ", std::strerror(errno)));
  return bytes;
}

std::uint64_t Load64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void Store64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

std::uint64_t Checksum(const unsigned char* data, std::size_t size) noexcept {
  // Each step is a bijection of the state (xor with the word, times an odd constant), so two
  // inputs of one size that differ in a single word always end in different states.
  constexpr std::uint64_t kOdd = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = 0x243F6A8885A308D3ull ^ static_cast<std::uint64_t>(size);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) h = (h ^ Load64(data + i)) * kOdd;
  if (i < size) {
    unsigned char last[8] = {};
    std::memcpy(last, data + i, size - i);
    h = (h ^ Load64(last)) * kOdd;
  }
  return h ^ (h >> 31);
}

absl::Status Seal(const std::filesystem::path& path) {
  auto bytes = ReadAll(path);
  if (!bytes.ok()) return bytes.status();
  unsigned char seal[kSealBytes];
  std::memcpy(seal, kMagic, 16);
  Store64(seal + 16, bytes->size());
  Store64(seal + 24, Checksum(bytes->data(), bytes->size()));
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(seal), kSealBytes);
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat(path.string(), ": cannot write its seal: ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<SealState> CheckSeal(const std::filesystem::path& path) {
  auto bytes = ReadAll(path);
  if (!bytes.ok()) return bytes.status();
  const std::size_t n = bytes->size();
  if (n < kSealBytes || std::memcmp(bytes->data() + n - kSealBytes, kMagic, 16) != 0) return SealState::kUnsealed;
  const unsigned char* seal = bytes->data() + n - kSealBytes;
  const std::uint64_t length = Load64(seal + 16);
  if (length != n - kSealBytes) {
    return absl::DataLossError(absl::StrCat(path.string(), ": corrupt results file: its seal says ", length,
                                            " bytes but ", n - kSealBytes, " precede it (truncated or altered); it was "
                                            "left untouched"));
  }
  if (Load64(seal + 24) != Checksum(bytes->data(), n - kSealBytes)) {
    return absl::DataLossError(absl::StrCat(path.string(), ": corrupt results file: its contents do not match "
                                            "their checksum (changed after it was written); it was left untouched"));
  }
  return SealState::kSealed;
}

absl::Status Unseal(const std::filesystem::path& path) {
  auto state = CheckSeal(path);
  if (!state.ok()) return state.status();
  if (*state == SealState::kUnsealed) return absl::OkStatus();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) std::filesystem::resize_file(path, size - kSealBytes, ec);
  if (ec) return absl::InternalError(absl::StrCat(path.string(), ": cannot remove its seal: ", ec.message()));
  return absl::OkStatus();
}

}  // namespace testbed::results
