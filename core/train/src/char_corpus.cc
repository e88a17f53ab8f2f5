#include "testbed/train/char_corpus.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace testbed::train {

absl::StatusOr<CharCorpus> CharCorpus::Load(const std::string& path, double validation_fraction) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.size() < 2) return absl::InvalidArgumentError(absl::StrCat(path, ": too little text"));
  CharCorpus c;
  c.index_of_.assign(256, -1);
  std::vector<bool> seen(256, false);
  for (unsigned char ch : text) seen[ch] = true;
  for (int b = 0; b < 256; ++b) {
    if (!seen[static_cast<size_t>(b)]) continue;
    c.index_of_[static_cast<size_t>(b)] = static_cast<int>(c.alphabet_.size());
    c.alphabet_.push_back(static_cast<char>(b));
  }
  std::vector<std::int64_t> ids;
  ids.reserve(text.size());
  for (unsigned char ch : text) ids.push_back(c.index_of_[ch]);
  // Contiguous split: validation text is text the model never saw, not shuffled neighbours.
  const auto val = static_cast<std::int64_t>(validation_fraction * static_cast<double>(ids.size()));
  c.train_.assign(ids.begin(), ids.end() - val);
  c.validation_.assign(ids.end() - val, ids.end());
  return c;
}

std::string CharCorpus::Decode(const std::vector<std::int64_t>& ids) const {
  std::string s;
  for (std::int64_t id : ids) {
    if (id >= 0 && id < vocab_size()) s.push_back(alphabet_[static_cast<size_t>(id)]);
  }
  return s;
}

absl::StatusOr<std::vector<std::int64_t>> CharCorpus::Encode(const std::string& text) const {
  std::vector<std::int64_t> ids;
  for (unsigned char ch : text) {
    const int id = index_of_[ch];
    if (id < 0) return absl::InvalidArgumentError(absl::StrCat("character code ", static_cast<int>(ch), " is not in the corpus"));
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<TokenBatch> CharCorpus::Sample(const std::vector<std::int64_t>& ids, std::int64_t batch,
                                              std::int64_t seq_len, Rng& rng) {
  const auto n = static_cast<std::int64_t>(ids.size());
  if (n < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat("corpus of ", n, " characters is shorter than a window of ", seq_len + 1));
  }
  TokenBatch out;
  out.inputs.reserve(static_cast<size_t>(batch * seq_len));
  out.targets.reserve(static_cast<size_t>(batch * seq_len));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto start = static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n - seq_len)));
    for (std::int64_t t = 0; t < seq_len; ++t) {
      out.inputs.push_back(ids[static_cast<size_t>(start + t)]);
      out.targets.push_back(ids[static_cast<size_t>(start + t + 1)]);
    }
  }
  return out;
}

}  // namespace testbed::train
