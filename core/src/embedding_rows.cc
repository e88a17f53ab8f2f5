#include "testbed/embedding_rows.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

std::uint64_t SplitMix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double Uniform(std::uint64_t& state) { return static_cast<double>(SplitMix(state) >> 11) * 0x1.0p-53; }

}  // namespace

double ExpectedDistinctRows(std::int64_t vocab, double exponent, double tokens) {
  if (vocab < 1 || tokens <= 0) return 0;
  double norm = 0;
  for (std::int64_t r = 1; r <= vocab; ++r) norm += std::pow(static_cast<double>(r), -exponent);
  double expected = 0;
  for (std::int64_t r = 1; r <= vocab; ++r) {
    const double p = std::pow(static_cast<double>(r), -exponent) / norm;
    // 1 - (1 - p)^n, accurate for small p.
    expected += -std::expm1(tokens * std::log1p(-std::min(p, 1.0 - 1e-16)));
  }
  return expected;
}

absl::StatusOr<WordCorpus> ReadWordCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the text"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '\'') {
      word.push_back(static_cast<char>(std::tolower(u)));
    } else {
      flush();
    }
  }
  flush();
  if (words.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no words in the text"));
  // Rank by frequency, ties by first appearance.
  std::unordered_map<std::string, std::pair<std::int64_t, std::int64_t>> stats;  // count, first position
  for (size_t i = 0; i < words.size(); ++i) {
    auto [it, fresh] = stats.try_emplace(words[i], 0, static_cast<std::int64_t>(i));
    ++it->second.first;
  }
  std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> ranked(stats.begin(), stats.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first : a.second.second < b.second.second;
  });
  std::unordered_map<std::string, std::int32_t> id;
  for (size_t r = 0; r < ranked.size(); ++r) id[ranked[r].first] = static_cast<std::int32_t>(r);
  WordCorpus out;
  out.distinct = static_cast<std::int64_t>(ranked.size());
  out.ids.reserve(words.size());
  for (const std::string& w : words) out.ids.push_back(id[w]);
  return out;
}

EmbeddingRowSampler::EmbeddingRowSampler(TokenModel model, std::int64_t vocab, int replicas,
                                         std::int64_t tokens_per_replica, std::int64_t seq_len, int stale_lag,
                                         int time_parts)
    : model_(std::move(model)),
      vocab_(vocab),
      replicas_(replicas),
      tokens_(tokens_per_replica),
      seq_len_(std::max<std::int64_t>(1, seq_len)),
      lag_(std::max(1, stale_lag)),
      time_parts_(std::max(1, time_parts)),
      state_(model_.seed * 0x2545F4914F6CDD1DULL + 17) {}

std::int64_t EmbeddingRowSampler::Draw() {
  const double u = Uniform(state_);
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return std::min<std::int64_t>(vocab_ - 1, it - cdf_.begin());
}

absl::StatusOr<SparseRows> EmbeddingRowSampler::Next() {
  if (vocab_ < 1 || replicas_ < 1 || tokens_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat("embedding rows: vocab ", vocab_, ", replicas ", replicas_,
                                                   ", tokens ", tokens_, " (need vocab >= 1, replicas >= 1)"));
  }
  const bool corpus = model_.kind == TokenModel::Kind::kCorpus;
  if (seen_.empty()) {
    if (corpus) {
      if (model_.corpus.empty()) return absl::InvalidArgumentError("embedding rows: the token corpus is empty");
      const std::int32_t top = *std::max_element(model_.corpus.begin(), model_.corpus.end());
      if (top >= vocab_) {
        return absl::InvalidArgumentError(absl::StrCat("embedding rows: the text has ", top + 1,
                                                       " distinct words, more than the model's vocabulary of ", vocab_,
                                                       " rows"));
      }
    } else {
      cdf_.resize(static_cast<size_t>(vocab_));
      double sum = 0;
      for (std::int64_t r = 0; r < vocab_; ++r) {
        sum += std::pow(static_cast<double>(r + 1), -model_.zipf_exponent);
        cdf_[static_cast<size_t>(r)] = sum;
      }
      for (double& c : cdf_) c /= sum;
    }
    seen_.assign(static_cast<size_t>(vocab_), -1);
    first_.assign(static_cast<size_t>(vocab_), 0);
    ago_.assign(static_cast<size_t>(lag_ + 1), std::vector<char>(static_cast<size_t>(vocab_), 0));
  }
  const int n = replicas_;
  SparseRows out;
  out.replicas = n;
  out.rows.assign(static_cast<size_t>(n) * static_cast<size_t>(n), 0.0);
  out.stale.assign(out.rows.size(), 0.0);
  out.parts = time_parts_;
  if (time_parts_ > 1) out.stale_parts.assign(out.rows.size() * static_cast<size_t>(time_parts_), 0.0);
  const std::int64_t t = iteration_++;
  // Rows touched by iteration t - lag (ring slot), and this iteration's slot, cleared.
  std::vector<char>& old = ago_[static_cast<size_t>((t + 1) % (lag_ + 1))];  // = (t - lag) mod (lag + 1)
  std::vector<char>& now = ago_[static_cast<size_t>(t % (lag_ + 1))];
  std::fill(now.begin(), now.end(), 0);
  for (int i = 0; i < n; ++i) {
    const int stamp = static_cast<int>(t) * n + i;
    named_.clear();
    // `position`: the token's place in its sequence.
    auto touch = [&](std::int64_t row, std::int64_t position) {
      const size_t r = static_cast<size_t>(row);
      if (seen_[r] == stamp) {
        first_[r] = std::min(first_[r], position);
        return;
      }
      seen_[r] = stamp;
      first_[r] = position;
      named_.push_back(row);
      now[r] = 1;
    };
    if (corpus) {
      const auto size = static_cast<std::int64_t>(model_.corpus.size());
      for (std::int64_t done = 0; done < tokens_; done += seq_len_) {
        std::int64_t at = static_cast<std::int64_t>(SplitMix(state_) % static_cast<std::uint64_t>(size));
        for (std::int64_t k = 0; k < std::min(seq_len_, tokens_ - done); ++k) {
          touch(model_.corpus[static_cast<size_t>(at)], k);
          at = at + 1 == size ? 0 : at + 1;
        }
      }
    } else {
      for (std::int64_t k = 0; k < tokens_; ++k) touch(Draw(), k % seq_len_);
    }
    for (std::int64_t row : named_) {
      const size_t cell = static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(row % n);
      out.rows[cell] += 1;
      if (t < lag_ || old[static_cast<size_t>(row)] == 0) continue;
      out.stale[cell] += 1;
      if (time_parts_ > 1) {
        const std::int64_t part = first_[static_cast<size_t>(row)] * time_parts_ / seq_len_;
        out.stale_parts[static_cast<size_t>(part) * out.rows.size() + cell] += 1;
      }
    }
  }
  return out;
}

}  // namespace testbed
