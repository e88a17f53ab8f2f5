// Where the executor's batches come from: random windows of the shipped text corpus (tiny
// GPT), or shuffled rows of the digits data set (MLP). Deterministic in (seed, step), so every
// rank draws the same global batch and takes its own rows of it.
#pragma once

#include <cstdint>

#include "exec/executor.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/labeled_data.h"

namespace testbed::exec {

[[nodiscard]] BatchSource TextSource(const train::CharCorpus& corpus, std::int64_t seq_len, std::uint64_t seed);
// A fixed held-out batch of `samples` windows of the corpus's validation part.
[[nodiscard]] std::function<absl::StatusOr<Batch>()> TextValidation(const train::CharCorpus& corpus,
                                                                    std::int64_t seq_len, std::int64_t samples);
[[nodiscard]] BatchSource LabeledSource(const train::LabeledData& data, std::uint64_t seed);
[[nodiscard]] std::function<absl::StatusOr<Batch>()> LabeledValidation(const train::LabeledData& data);

}  // namespace testbed::exec
