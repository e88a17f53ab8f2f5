// The rows of an embedding table that batches touch (testbed/embedding_rows.h): the closed
// form of the expected distinct rows, sampled counts against it, the owner split, the rows an
// earlier update changed, word corpora, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "testbed/embedding_rows.h"

namespace testbed {
namespace {

TEST(EmbeddingRows, ExpectedDistinctRowsByHand) {
  // Uniform (exponent 0): V (1 - (1 - 1/V)^n).
  EXPECT_NEAR(ExpectedDistinctRows(100, 0.0, 50), 100 * (1 - std::pow(0.99, 50)), 1e-9);
  // Zipf 1 over 3 rows: p = (6, 3, 2) / 11; two draws: sum 1 - (1 - p)^2.
  const double p[] = {6.0 / 11, 3.0 / 11, 2.0 / 11};
  double expected = 0;
  for (double q : p) expected += 1 - (1 - q) * (1 - q);
  EXPECT_NEAR(ExpectedDistinctRows(3, 1.0, 2), expected, 1e-12);
  EXPECT_EQ(ExpectedDistinctRows(10, 1.0, 0), 0.0);
  // Skew repeats tokens: fewer distinct rows than uniform draws.
  EXPECT_LT(ExpectedDistinctRows(33278, 1.0, 1120), ExpectedDistinctRows(33278, 0.0, 1120));
}

TEST(EmbeddingRows, SampledCountsMatchTheClosedFormAndSplitByOwner) {
  const std::int64_t vocab = 5000, tokens = 700;
  const int replicas = 4, iterations = 200;
  TokenModel m;
  m.zipf_exponent = 1.0;
  m.seed = 3;
  EmbeddingRowSampler sampler(m, vocab, replicas, tokens, 35);
  double total = 0;
  for (int t = 0; t < iterations; ++t) {
    auto rows = sampler.Next();
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->replicas, replicas);
    ASSERT_EQ(rows->rows.size(), 16u);
    for (int i = 0; i < replicas; ++i) {
      double mine = 0;
      for (int j = 0; j < replicas; ++j) {
        const size_t c = static_cast<size_t>(i * replicas + j);
        EXPECT_LE(rows->stale[c], rows->rows[c]);
        EXPECT_GE(rows->stale[c], 0);
        mine += rows->rows[c];
      }
      EXPECT_LE(mine, static_cast<double>(tokens));
      total += mine;
    }
  }
  const double mean = total / (iterations * replicas);
  EXPECT_NEAR(mean, ExpectedDistinctRows(vocab, 1.0, tokens), 0.01 * mean);
}

TEST(EmbeddingRows, StaleRowsAreThoseTheIterationLagBeforeTouched) {
  // Every row touched every iteration (a vocabulary of 4 under many tokens): from iteration
  // `lag` on, every row a replica names was touched `lag` iterations before.
  for (int lag : {1, 2}) {
    TokenModel m;
    m.zipf_exponent = 0.0;
    EmbeddingRowSampler sampler(m, 4, 2, 400, 10, lag);
    for (int t = 0; t < 5; ++t) {
      auto rows = sampler.Next();
      ASSERT_TRUE(rows.ok());
      for (size_t c = 0; c < rows->rows.size(); ++c) {
        EXPECT_EQ(rows->rows[c], 2.0) << "t " << t;  // rows 0..3 by owner r mod 2: two each
        EXPECT_EQ(rows->stale[c], t >= lag ? 2.0 : 0.0) << "lag " << lag << " t " << t;
      }
    }
  }
}

TEST(EmbeddingRows, StaleRowsSplitByThePartOfTheSequenceThatFirstNamesThem) {
  // A text of 0 1 2 3 0 1 2 3 ...: one sequence of 4 from any offset names every row once, at
  // positions 0..3; at 2 parts, two rows fall in each. From iteration 1 on all four are stale.
  TokenModel m;
  m.kind = TokenModel::Kind::kCorpus;
  m.corpus = {0, 1, 2, 3, 0, 1, 2, 3};
  EmbeddingRowSampler sampler(m, 4, 1, 4, 4, 1, 2);
  for (int t = 0; t < 3; ++t) {
    auto rows = sampler.Next();
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->parts, 2);
    ASSERT_EQ(rows->stale_parts.size(), 2u);
    EXPECT_EQ(rows->stale[0], t == 0 ? 0.0 : 4.0);
    EXPECT_EQ(rows->stale_parts[0], t == 0 ? 0.0 : 2.0);
    EXPECT_EQ(rows->stale_parts[1], t == 0 ? 0.0 : 2.0);
  }
  // Under a Zipf law the parts add up to the stale rows of every cell.
  TokenModel z;
  EmbeddingRowSampler zipf(z, 300, 2, 200, 20, 1, 4);
  for (int t = 0; t < 3; ++t) {
    auto rows = zipf.Next();
    ASSERT_TRUE(rows.ok());
    for (size_t c = 0; c < rows->rows.size(); ++c) {
      double sum = 0;
      for (int p = 0; p < 4; ++p) sum += rows->stale_parts[static_cast<size_t>(p) * rows->rows.size() + c];
      EXPECT_EQ(sum, rows->stale[c]);
    }
  }
}

TEST(EmbeddingRows, DeterministicBySeed) {
  auto draw = [](std::uint64_t seed) {
    TokenModel m;
    m.seed = seed;
    EmbeddingRowSampler s(m, 1000, 2, 300, 30);
    std::vector<double> out;
    for (int t = 0; t < 3; ++t) {
      auto r = s.Next();
      out.insert(out.end(), r->rows.begin(), r->rows.end());
    }
    return out;
  };
  EXPECT_EQ(draw(1), draw(1));
  EXPECT_NE(draw(1), draw(2));
}

TEST(EmbeddingRows, WordCorpusRanksWordsByFrequencyAndDrawsSequences) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "embedding_rows_corpus.txt";
  std::ofstream(file) << "The cat, the DOG; the cat's bowl.\n";
  auto corpus = ReadWordCorpus(file.string());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  // the x3, cat x1, dog x1, cat's x1, bowl x1: ranks by count, ties by first appearance.
  EXPECT_EQ(corpus->distinct, 5);
  EXPECT_EQ(corpus->ids, (std::vector<std::int32_t>{0, 1, 0, 2, 0, 3, 4}));
  TokenModel m;
  m.kind = TokenModel::Kind::kCorpus;
  m.corpus = corpus->ids;
  // One replica, sequences of 7 covering the whole text from any offset: all 5 words.
  EmbeddingRowSampler sampler(m, 5, 1, 7, 7);
  auto rows = sampler.Next();
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->rows[0], 5.0);
  // A vocabulary smaller than the text's words is refused by name.
  EmbeddingRowSampler small(m, 3, 1, 7, 7);
  auto refused = small.Next();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("5 distinct words, more than the model's vocabulary of 3"),
            std::string::npos)
      << refused.status();
  std::filesystem::remove(file);
  EXPECT_EQ(ReadWordCorpus(file.string()).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace testbed
