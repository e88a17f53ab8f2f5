#include "exec/data_sources.h"

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"
#include "testbed/train/rng.h"

namespace testbed::exec {

BatchSource TextSource(const train::CharCorpus& corpus, std::int64_t seq_len, std::uint64_t seed) {
  return [&corpus, seq_len, seed](std::int64_t step, std::int64_t samples) -> absl::StatusOr<Batch> {
    train::Rng rng(seed * 1000003u + static_cast<std::uint64_t>(step) + 17);
    TESTBED_ASSIGN_OR_RETURN(train::TokenBatch tb, train::CharCorpus::Sample(corpus.train(), samples, seq_len, rng));
    Batch b;
    b.inputs = train::IdsToColumn<float>(tb.inputs);
    b.targets = std::move(tb.targets);
    b.rows_per_sample = seq_len;
    return b;
  };
}

std::function<absl::StatusOr<Batch>()> TextValidation(const train::CharCorpus& corpus, std::int64_t seq_len,
                                                      std::int64_t samples) {
  return [&corpus, seq_len, samples]() -> absl::StatusOr<Batch> {
    train::Rng rng(424242);
    TESTBED_ASSIGN_OR_RETURN(train::TokenBatch tb,
                             train::CharCorpus::Sample(corpus.validation(), samples, seq_len, rng));
    Batch b;
    b.inputs = train::IdsToColumn<float>(tb.inputs);
    b.targets = std::move(tb.targets);
    b.rows_per_sample = seq_len;
    return b;
  };
}

BatchSource LabeledSource(const train::LabeledData& data, std::uint64_t seed) {
  return [&data, seed](std::int64_t step, std::int64_t samples) -> absl::StatusOr<Batch> {
    if (samples > data.size()) {
      return absl::InvalidArgumentError(absl::StrCat("a batch of ", samples, " samples from a data set of ",
                                                     data.size()));
    }
    // Epoch e is permutation e of the data; step s takes the next `samples` rows of it.
    const std::int64_t per_epoch = data.size() / samples;
    const std::int64_t epoch = step / per_epoch, offset = (step % per_epoch) * samples;
    train::Rng rng(seed * 7919u + static_cast<std::uint64_t>(epoch));
    std::vector<std::int64_t> order = rng.Permutation(data.size());
    std::vector<std::int64_t> rows(order.begin() + offset, order.begin() + offset + samples);
    train::LabeledData part = data.Rows(rows);
    Batch b;
    b.inputs = std::move(part.features);
    b.targets = std::move(part.labels);
    b.rows_per_sample = 1;
    return b;
  };
}

std::function<absl::StatusOr<Batch>()> LabeledValidation(const train::LabeledData& data) {
  return [&data]() -> absl::StatusOr<Batch> {
    Batch b;
    b.inputs = data.features;
    b.targets = data.labels;
    b.rows_per_sample = 1;
    return b;
  };
}

}  // namespace testbed::exec
