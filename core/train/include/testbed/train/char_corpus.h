// A character-level text corpus for the tiny GPT: the bytes of a text file, a vocabulary of
// the distinct bytes (sorted), a contiguous train/validation split, and random windows of
// seq_len + 1 characters cut into inputs and next-character targets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/rng.h"

namespace testbed::train {

struct TokenBatch {
  std::vector<std::int64_t> inputs;   // batch * seq_len ids, sequence after sequence
  std::vector<std::int64_t> targets;  // the next character of each input
};

class CharCorpus {
 public:
  // NotFound / InvalidArgument (empty file) naming the path.
  [[nodiscard]] static absl::StatusOr<CharCorpus> Load(const std::string& path, double validation_fraction = 0.1);

  [[nodiscard]] std::int64_t vocab_size() const noexcept { return static_cast<std::int64_t>(alphabet_.size()); }
  [[nodiscard]] const std::vector<std::int64_t>& train() const noexcept { return train_; }
  [[nodiscard]] const std::vector<std::int64_t>& validation() const noexcept { return validation_; }
  [[nodiscard]] std::string Decode(const std::vector<std::int64_t>& ids) const;
  // Ids of `text`; InvalidArgument for a character outside the vocabulary.
  [[nodiscard]] absl::StatusOr<std::vector<std::int64_t>> Encode(const std::string& text) const;

  // `batch` windows at random offsets of `ids` (train() or validation()). InvalidArgument
  // when ids is shorter than seq_len + 1.
  [[nodiscard]] static absl::StatusOr<TokenBatch> Sample(const std::vector<std::int64_t>& ids, std::int64_t batch,
                                                         std::int64_t seq_len, Rng& rng);

 private:
  std::string alphabet_;
  std::vector<int> index_of_;  // byte -> id, -1 if absent
  std::vector<std::int64_t> train_;
  std::vector<std::int64_t> validation_;
};

}  // namespace testbed::train
