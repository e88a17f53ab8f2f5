// Megatron-Core's uneven pipeline split: the blocks each virtual stage holds, by hand, for
// the first/last-stage counts and for the embedding and head counted as blocks (Llama 3
// 405B's layout), and the splits Megatron-Core refuses.
#include "uneven_split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "testbed/model_graph.h"

namespace testbed::megatron {
namespace {

using ::testing::HasSubstr;

ModelGraph Gpt(int blocks) {
  ModelShape s;
  s.name = "test-gpt";
  s.family = "gpt";
  s.layers = blocks;
  s.hidden = 256;
  s.heads = 4;
  s.seq_len = 128;
  s.vocab = 1024;
  return *BuildModelGraph(s);
}

// Per virtual stage: (has the embedding, blocks, has the head).
struct Content {
  bool embedding = false;
  int blocks = 0;
  bool head = false;
  bool operator==(const Content&) const = default;
};

std::vector<Content> Contents(const ModelGraph& model, const std::vector<StageSpec>& stages) {
  std::vector<Content> out;
  for (const StageSpec& st : stages) {
    Content c;
    std::set<int> blocks;
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      if (layer.block >= 0) {
        blocks.insert(layer.block);
      } else if (l == 0) {
        c.embedding = true;
      } else {
        c.head = true;
      }
    }
    c.blocks = static_cast<int>(blocks.size());
    out.push_back(c);
  }
  return out;
}

TEST(UnevenSplit, FirstAndLastStagesTakeTheirCountsTheRestShareEvenly) {
  const ModelGraph model = Gpt(10);
  UnevenSplit u;
  u.first_stage_blocks = 1;
  u.last_stage_blocks = 1;
  auto st = UnevenBlockStages(model, 4, 1, u);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(Contents(model, *st),
            (std::vector<Content>{{true, 1, false}, {false, 4, false}, {false, 4, false}, {false, 1, true}}));
  // Contiguous and covering every layer.
  EXPECT_EQ(st->front().first_layer, 0);
  for (size_t k = 1; k < st->size(); ++k) EXPECT_EQ((*st)[k].first_layer, (*st)[k - 1].end_layer);
  EXPECT_EQ(st->back().end_layer, static_cast<int>(model.layers.size()));
}

TEST(UnevenSplit, OnlyTheLastStageGiven) {
  const ModelGraph model = Gpt(11);
  UnevenSplit u;
  u.last_stage_blocks = 2;
  auto st = UnevenBlockStages(model, 4, 1, u);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(Contents(model, *st),
            (std::vector<Content>{{true, 3, false}, {false, 3, false}, {false, 3, false}, {false, 2, true}}));
}

TEST(UnevenSplit, EachStagesCountIsSplitOverItsChunksInVirtualStageOrder) {
  // 12 blocks, pp 2, 2 chunks, first stage 4: stage 0 holds 2 + 2, stage 1 holds 4 + 4;
  // virtual stages run (chunk 0: stage 0, stage 1), (chunk 1: stage 0, stage 1).
  const ModelGraph model = Gpt(12);
  UnevenSplit u;
  u.first_stage_blocks = 4;
  auto st = UnevenBlockStages(model, 2, 2, u);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(Contents(model, *st),
            (std::vector<Content>{{true, 2, false}, {false, 4, false}, {false, 2, false}, {false, 4, true}}));
}

TEST(UnevenSplit, Llama3LayoutFirstChunkOnlyTheEmbeddingLastOnlyTheHead) {
  // Llama 3 405B: 126 blocks over 16 stages x 8 chunks with the embedding and the head each
  // counted as a block: 128 slots, one per virtual stage.
  const ModelGraph model = Gpt(126);
  UnevenSplit u;
  u.embedding_as_block = true;
  u.head_as_block = true;
  auto st = UnevenBlockStages(model, 16, 8, u);
  ASSERT_TRUE(st.ok()) << st.status();
  const std::vector<Content> c = Contents(model, *st);
  ASSERT_EQ(c.size(), 128u);
  EXPECT_EQ(c.front(), (Content{true, 0, false}));
  EXPECT_EQ(c.back(), (Content{false, 0, true}));
  for (size_t k = 1; k + 1 < c.size(); ++k) EXPECT_EQ(c[k], (Content{false, 1, false})) << "virtual stage " << k;
}

TEST(UnevenSplit, RefusesWhatMegatronCoreRefuses) {
  const ModelGraph model = Gpt(10);
  UnevenSplit u;
  u.first_stage_blocks = 2;
  // 8 blocks over 3 stages do not share evenly.
  auto a = UnevenBlockStages(model, 4, 1, u);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("leave 8 for the other 3 pipeline stages"));
  // A stage's 3 blocks over 2 chunks.
  u.first_stage_blocks = 4;
  auto b = UnevenBlockStages(model, 3, 2, u);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("pipeline stage 1 holds 3 blocks"));
  // More blocks on the first stage than the model has.
  u.first_stage_blocks = 11;
  EXPECT_FALSE(UnevenBlockStages(model, 2, 1, u).ok());
  // An empty virtual stage: the first stage with no block and the embedding not counted still
  // holds the embedding, but a middle chunk with nothing is refused.
  UnevenSplit empty;
  empty.first_stage_blocks = 0;
  empty.last_stage_blocks = 10;
  auto c = UnevenBlockStages(model, 3, 1, empty);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("virtual stage 1 (pipeline stage 1, chunk 0) would hold nothing"));
  // One stage: no first or last stage of its own.
  EXPECT_FALSE(UnevenBlockStages(model, 1, 1, u).ok());
}

}  // namespace
}  // namespace testbed::megatron
