// The rows of an embedding table that training batches touch: only the rows a batch's tokens
// name get a gradient, so sparse embedding communication (EmbRace, TriRace) sends those rows
// and not the whole table. Counts are drawn by sampling tokens from a TokenModel (a Zipf law
// over the vocabulary, or a real text) per iteration and data-parallel replica, split by the
// replica owning each row (row r: replica r mod replicas), with the rows an earlier
// iteration updated marked stale; the Zipf law's expected count has a closed form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/step_inputs.h"

namespace testbed {

// Expected distinct rows among `tokens` independent draws from a Zipf law of `exponent` over
// `vocab` rows: sum over rows r of 1 - (1 - p_r)^tokens, p_r = r^-exponent / H (ranks from 1).
[[nodiscard]] double ExpectedDistinctRows(std::int64_t vocab, double exponent, double tokens);

// Token ids of a text, words ranked by frequency (0: the most frequent, ties by first
// appearance): a word is a run of letters, digits or apostrophes, lower-cased.
struct WordCorpus {
  std::vector<std::int32_t> ids;
  std::int64_t distinct = 0;
};
// NotFound / InvalidArgument naming the file when it cannot be read or holds no word.
[[nodiscard]] absl::StatusOr<WordCorpus> ReadWordCorpus(const std::string& path);

// Draws, iteration after iteration from 0, the rows each replica's batch touches.
class EmbeddingRowSampler {
 public:
  // `tokens_per_replica` tokens per replica and iteration, in sequences of `seq_len`;
  // `stale_lag`: a lookup of iteration t needs the update of iteration t - stale_lag (1 for
  // synchronous training, 2 under PipeDream-2BW, whose iteration t runs on the weights after
  // iteration t - 2's update).
  // `time_parts` > 1: the stale rows are also split by the part of the sequence (of that
  // many equal parts of its positions) where a replica's batch first names them.
  EmbeddingRowSampler(TokenModel model, std::int64_t vocab, int replicas, std::int64_t tokens_per_replica,
                      std::int64_t seq_len, int stale_lag = 1, int time_parts = 1);
  // The next iteration's rows. InvalidArgument when the corpus names rows beyond the vocabulary
  // or has no tokens, or a count is out of range.
  [[nodiscard]] absl::StatusOr<SparseRows> Next();

 private:
  [[nodiscard]] std::int64_t Draw();

  TokenModel model_;
  std::int64_t vocab_;
  int replicas_;
  std::int64_t tokens_, seq_len_;
  int lag_;
  int time_parts_;
  int iteration_ = 0;
  std::uint64_t state_ = 0;            // the draw's random state
  std::vector<double> cdf_;            // Zipf: cumulative probabilities by rank
  std::vector<int> seen_;              // per row: the last (iteration, replica) stamp that named it
  std::vector<std::int64_t> first_;    // per row: the earliest position the current replica names it at
  std::vector<std::int64_t> named_;    // rows the current replica names
  std::vector<std::vector<char>> ago_; // per row: touched 1..lag iterations ago (a ring)
};

}  // namespace testbed
