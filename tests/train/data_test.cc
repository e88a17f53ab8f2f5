// The shipped data sets and their loaders: sizes and ranges as documented, deterministic
// and disjoint splits, batches that cover an epoch exactly once.
#include <algorithm>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "testbed/train/batcher.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/labeled_data.h"

namespace testbed::train {
namespace {

const std::string kDigits = std::string(TESTBED_DATA_DIR) + "/digits/digits.csv.gz";
const std::string kText = std::string(TESTBED_DATA_DIR) + "/text/gpl-3.0.txt";

TEST(Digits, LoadsTheDocumentedShape) {
  auto data = LoadDigits(kDigits);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 1797);
  EXPECT_EQ(data->features.cols(), 64);
  EXPECT_GE(data->features.minCoeff(), 0.0f);
  EXPECT_LE(data->features.maxCoeff(), 1.0f);
  std::set<std::int64_t> classes(data->labels.begin(), data->labels.end());
  EXPECT_EQ(classes, (std::set<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Digits, BadFileIsAnErrorNamingTheLine) {
  const std::string path = ::testing::TempDir() + "/bad_digits.csv";
  std::ofstream(path) << "0,1,2\n";
  auto data = LoadDigits(path);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(data.status().message()).find(path + ":1"), std::string::npos) << data.status();
  EXPECT_EQ(LoadDigits(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(Digits, SplitIsDeterministicDisjointAndComplete) {
  auto data = LoadDigits(kDigits);
  ASSERT_TRUE(data.ok());
  auto [train, val] = SplitTrainValidation(*data, 0.25, 11);
  auto [train2, val2] = SplitTrainValidation(*data, 0.25, 11);
  EXPECT_EQ(train.labels, train2.labels);
  EXPECT_EQ(val.features, val2.features);
  EXPECT_EQ(train.size() + val.size(), data->size());
  EXPECT_EQ(val.size(), static_cast<std::int64_t>(0.25 * 1797));
  // Every sample lands on one side: the multiset of rows is preserved.
  std::multiset<std::vector<float>> all, split;
  auto rows = [](const LabeledData& d, std::multiset<std::vector<float>>& out) {
    for (Eigen::Index r = 0; r < d.features.rows(); ++r) {
      out.insert(std::vector<float>(d.features.row(r).data(), d.features.row(r).data() + d.features.cols()));
    }
  };
  rows(*data, all);
  rows(train, split);
  rows(val, split);
  EXPECT_EQ(all, split);
  auto [train3, val3] = SplitTrainValidation(*data, 0.25, 12);
  EXPECT_NE(train.labels, train3.labels) << "another seed, another shuffle";
}

TEST(Batcher, EachEpochCoversEverySampleOnce) {
  Batcher batcher(10, 4, 3);
  EXPECT_EQ(batcher.batches_per_epoch(), 3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    for (int b = 0; b < 3; ++b) {
      const auto batch = batcher.Next();
      EXPECT_EQ(batch.size(), b < 2 ? 4u : 2u);
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  Batcher again(10, 4, 3);
  Batcher other(10, 4, 4);
  EXPECT_EQ(again.Next(), Batcher(10, 4, 3).Next());
  EXPECT_NE(again.Next(), other.Next());
}

TEST(Batcher, DropLastSkipsTheShortBatch) {
  Batcher batcher(10, 4, 1, /*drop_last=*/true);
  EXPECT_EQ(batcher.batches_per_epoch(), 2);
  (void)batcher.Next();
  (void)batcher.Next();
  EXPECT_EQ(batcher.Next().size(), 4u);
  EXPECT_EQ(batcher.epoch(), 1);
}

TEST(CharCorpus, VocabularySplitAndRoundTrip) {
  auto corpus = CharCorpus::Load(kText, 0.1);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  std::ifstream in(kText, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(static_cast<std::size_t>(corpus->vocab_size()), std::set<char>(text.begin(), text.end()).size());
  EXPECT_EQ(corpus->train().size() + corpus->validation().size(), text.size());
  EXPECT_EQ(corpus->validation().size(), static_cast<std::size_t>(0.1 * static_cast<double>(text.size())));
  // Contiguous split: decoding both parts gives the text back.
  EXPECT_EQ(corpus->Decode(corpus->train()) + corpus->Decode(corpus->validation()), text);
  auto ids = corpus->Encode("GNU General Public License");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(corpus->Decode(*ids), "GNU General Public License");
  EXPECT_EQ(corpus->Encode("\x01").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CharCorpus, SampledTargetsAreTheNextCharacters) {
  auto corpus = CharCorpus::Load(kText);
  ASSERT_TRUE(corpus.ok());
  Rng rng(5), rng2(5);
  auto batch = CharCorpus::Sample(corpus->train(), 3, 20, rng);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->inputs.size(), 60u);
  for (int b = 0; b < 3; ++b) {
    for (int t = 0; t + 1 < 20; ++t) EXPECT_EQ(batch->targets[static_cast<size_t>(b * 20 + t)], batch->inputs[static_cast<size_t>(b * 20 + t + 1)]);
  }
  EXPECT_EQ(CharCorpus::Sample(corpus->train(), 3, 20, rng2)->inputs, batch->inputs);
  EXPECT_EQ(CharCorpus::Sample({1, 2}, 1, 5, rng).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::train
