// The shifted critical path program against 1F1B: the same forwards and backwards, Merak's
// four rules (recompute ahead exactly the cool-down micro-batches, M - m + s < P; last stage
// never checkpoints; stage P-2 runs its third forward before its first backward), and the
// four-micro-batch minimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "shifted_critical_path.h"

namespace testbed::merak {
namespace {

using Kind = PipelineOp::Kind;
using OpKey = std::tuple<int, int, int>;  // stage, kind, micro-batch

std::multiset<OpKey> ForwardsAndBackwards(const PipelineProgram& p) {
  std::multiset<OpKey> out;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    for (const PipelineOp& op : p.stages[s]) {
      if (op.kind != Kind::kRecompute) out.insert({static_cast<int>(s), static_cast<int>(op.kind), op.micro_batch});
    }
  }
  return out;
}

std::set<int> RecomputedAhead(const PipelineProgram& p, int s) {
  std::set<int> out;
  for (const PipelineOp& op : p.stages[static_cast<size_t>(s)]) {
    if (op.kind == Kind::kRecompute) out.insert(op.micro_batch);
  }
  return out;
}

TEST(ShiftedCriticalPathProgram, HasExactlyTheOperationsOfOneFOneBPlusRecomputes) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = std::max(4, pp); m <= 3 * pp + 4; ++m) {
      auto scp = ShiftedCriticalPathProgram(pp, m, ScpOptions{});
      ASSERT_TRUE(scp.ok()) << scp.status();
      // Every (stage, micro-batch): one forward, one backward, at most one recompute between.
      EXPECT_TRUE(CheckProgram(*scp, pp, 1, m).ok()) << CheckProgram(*scp, pp, 1, m) << " pp=" << pp << " m=" << m;
      EXPECT_EQ(ForwardsAndBackwards(*scp), ForwardsAndBackwards(OneFOneBProgram(pp, m))) << "pp=" << pp << " m=" << m;
    }
  }
}

TEST(ShiftedCriticalPathProgram, NeedsFourMicroBatchesAndOnePerStage) {
  for (int m = 1; m < 4; ++m) {
    auto p = ShiftedCriticalPathProgram(2, m, ScpOptions{});
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << m;
  }
  EXPECT_TRUE(ShiftedCriticalPathProgram(2, 4, ScpOptions{}).ok());
  EXPECT_EQ(ShiftedCriticalPathProgram(6, 5, ScpOptions{}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ShiftedCriticalPathProgram(6, 6, ScpOptions{}).ok());
}

TEST(ShiftedCriticalPathProgram, RecomputesAheadTheCoolDownMicroBatches) {
  // Without the stage shift, stage s < P-1 recomputes ahead exactly the micro-batches whose
  // backward directly follows another backward in 1F1B (the cool-down: nothing else is left to
  // run while the gradient travels), which is Merak's condition M - m + s < P with 0-based m
  // and s.
  ScpOptions o;
  o.shift_stage = false;
  for (int pp = 2; pp <= 8; ++pp) {
    for (int m = std::max(4, pp); m <= 20; ++m) {
      auto scp = ShiftedCriticalPathProgram(pp, m, o);
      ASSERT_TRUE(scp.ok());
      const PipelineProgram base = OneFOneBProgram(pp, m);
      for (int s = 0; s + 1 < pp; ++s) {
        const auto& ops = base.stages[static_cast<size_t>(s)];
        std::set<int> cooldown, condition;
        for (size_t i = 1; i < ops.size(); ++i) {
          if (ops[i].kind == Kind::kBackward && ops[i - 1].kind == Kind::kBackward) cooldown.insert(ops[i].micro_batch);
        }
        for (int i = 0; i < m; ++i) {
          if (m - i + s < pp) condition.insert(i);
        }
        EXPECT_EQ(RecomputedAhead(*scp, s), cooldown) << "pp=" << pp << " m=" << m << " s=" << s;
        EXPECT_EQ(RecomputedAhead(*scp, s), condition) << "pp=" << pp << " m=" << m << " s=" << s;
      }
    }
  }
}

TEST(ShiftedCriticalPathProgram, LastStageNeverCheckpoints) {
  for (int pp = 1; pp <= 6; ++pp) {
    auto scp = ShiftedCriticalPathProgram(pp, 8, ScpOptions{});
    ASSERT_TRUE(scp.ok());
    for (const PipelineOp& op : scp->stages.back()) {
      EXPECT_NE(op.kind, Kind::kRecompute);
      if (op.kind == Kind::kForward) {
        EXPECT_EQ(op.checkpoint, 0);
      }
    }
  }
}

TEST(ShiftedCriticalPathProgram, StageBeforeTheLastRunsItsThirdForwardBeforeItsFirstBackward) {
  for (int pp = 2; pp <= 6; ++pp) {
    for (int m = std::max(4, pp); m <= 10; ++m) {
      auto scp = ShiftedCriticalPathProgram(pp, m, ScpOptions{});
      ASSERT_TRUE(scp.ok());
      std::vector<std::pair<Kind, int>> got, want;
      for (const PipelineOp& op : scp->stages[static_cast<size_t>(pp - 2)]) {
        if (op.kind != Kind::kRecompute) got.emplace_back(op.kind, op.micro_batch);
      }
      // 1F1B on stage P-2 is F0 F1 B0 F2 B1 F3 ...; the shift swaps B0 and F2.
      const PipelineProgram base = OneFOneBProgram(pp, m);
      for (const PipelineOp& op : base.stages[static_cast<size_t>(pp - 2)]) want.emplace_back(op.kind, op.micro_batch);
      ASSERT_GE(want.size(), 4u);
      ASSERT_EQ(want[2], std::make_pair(Kind::kBackward, 0));
      ASSERT_EQ(want[3], std::make_pair(Kind::kForward, 2));
      std::swap(want[2], want[3]);
      EXPECT_EQ(got, want) << "pp=" << pp << " m=" << m;
      // Merak recomputes the shifted stage's first two micro-batches ahead, and stage P-3's first.
      EXPECT_EQ(RecomputedAhead(*scp, pp - 2), (std::set<int>{0, 1}));
      if (pp >= 3) {
        EXPECT_TRUE(RecomputedAhead(*scp, pp - 3).count(0));
      }
    }
  }
}

}  // namespace
}  // namespace testbed::merak
