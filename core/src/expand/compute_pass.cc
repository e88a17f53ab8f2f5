// Pass 2: every replica walks its op sequence. Replicas whose stage holds expert-parallel MoE
// layers walk in lock-step with the rest of their expert-parallel group (their all-to-alls
// join them), and so do the replicas of a context-parallel group (their attention layers
// gather keys and values from each other), or of a block holding whole groups of both; other
// replicas walk alone, replica by replica and stage by stage.
#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "expand/expansion.h"
#include "expand/layer_hooks.h"
#include "expand/p2p.h"
#include "expand/replica_copy.h"
#include "expand/sparse_embedding.h"
#include "testbed/status_macros.h"

namespace testbed::expand {
namespace {

bool StageHasExpertParallelism(const Expansion& e, int s) {
  for (const StageSpec& c : e.StageAt(s).chunks) {
    for (int l = c.first_layer; l < c.end_layer; ++l) {
      if (e.ExpertParallel(l)) return true;
    }
  }
  return false;
}

class Walker {
 public:
  explicit Walker(Expansion& e) : e_(e) {}

  absl::Status Group(int s, const std::vector<int>& replicas) {
    const auto& ops = e_.OpsOf(s, replicas.front());
    for (int r : replicas) {
      if (e_.OpsOf(s, r).size() != ops.size()) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": replicas ", replicas.front(), " and ", r,
                                                       " of one expert- or context-parallel group run different "
                                                       "numbers of micro-batches; they run in lock-step"));
      }
    }
    for (size_t k = 0; k < ops.size(); ++k) TESTBED_RETURN_IF_ERROR(Op(s, replicas, ops[k], k));
    return absl::OkStatus();
  }

 private:
  // The op's lanes, with empty frontiers: refilled in place for every op, so that the
  // frontiers' buffers are reused rather than allocated per op and rank.
  std::vector<LaneState>& Lanes(int s, const std::vector<int>& replicas, const PipelineOp& op) {
    lanes_.resize(replicas.size());
    for (size_t i = 0; i < replicas.size(); ++i) {
      const int r = replicas[i];
      LaneState& ls = lanes_[i];
      ls.lane = Lane{};
      ls.lane.stage = s;
      ls.lane.replica = r;
      ls.lane.iteration = op.iteration;
      ls.lane.micro_batch = op.micro_batch;
      ls.lane.chunk = op.chunk;
      ls.lane.fraction = static_cast<float>(e_.Fraction(s, r, op.micro_batch));
      ls.lane.samples = e_.plan.micro_batch;
      ls.frontier.resize(static_cast<size_t>(e_.plan.tp(s)));
      for (auto& f : ls.frontier) f.clear();
    }
    return lanes_;
  }

  static void ClearFrontiers(std::vector<LaneState>& lanes) {
    for (LaneState& ls : lanes) {
      for (auto& f : ls.frontier) f.clear();
    }
  }

  // Host-to-device copies before this forward (StepInput::copies). A copy waits for the
  // forward before it to start (one batch of prefetch), and the forward waits for the copy.
  void Copies(LaneState& ls, const PipelineOp& op) {
    const Lane& lane = ls.lane;
    const auto& copies = e_.Inputs(lane.iteration).copies;
    if (copies.empty()) return;
    const bool first_forward = op.micro_batch == 0 && op.chunk == 0;
    for (const HostTransfer& h : copies) {
      if (h.stage != lane.stage || h.replica != lane.replica) continue;
      if (!(h.micro_batch == lane.micro_batch || (h.micro_batch < 0 && first_forward))) continue;
      const auto key = std::pair(lane.stage, lane.replica);
      std::vector<TaskId> deps;
      if (auto it = last_forward_.find(key); it != last_forward_.end()) deps.push_back(it->second);
      for (int t = 0; t < e_.plan.tp(lane.stage); ++t) {
        Task c = LaneTask(lane, TaskKind::kCopy, streams::kHostCopy, Phase::kForward);
        c.device = e_.Dev(lane.replica, lane.stage, t);
        c.bytes = h.bytes;
        c.work = e_.sched.AddWork(CopyWork{h.to_device, h.host});
        ls.frontier[static_cast<size_t>(t)].push_back(e_.sched.Add(c, deps));
      }
    }
  }

  absl::Status Op(int s, const std::vector<int>& replicas, const PipelineOp& op, size_t k) {
    std::vector<LaneState>& lanes = Lanes(s, replicas, op);
    const int c = op.chunk, mb = op.micro_batch, it = op.iteration;
    const int g = c * e_.pp + s;
    const int last_g = e_.pp * e_.chunks - 1;
    const StageSpec& st = e_.plan.Chunk(s, c);
    const int r = st.recompute_layers;
    auto key = [&](int replica) { return std::tuple(it, s, replica, c, mb); };
    switch (op.kind) {
      case PipelineOp::Kind::kForward: {
        const TaskId before = static_cast<TaskId>(e_.sched.size());
        for (LaneState& ls : lanes) {
          Copies(ls, op);
          if (g > 0) EmitRecv(e_, ls, Phase::kForward, g, (g - 1) % e_.pp, BoundaryBytes(e_, ls.lane, st.first_layer));
        }
        const bool ckpt = r > 0 && (op.checkpoint < 0 || op.checkpoint > 0);
        // The chunk's first forward of the iteration meets the per-bucket weight gathers.
        const bool gathered = e_.TracksForwards() && it > 0 && gathered_.insert({it, s, replicas.front(), c}).second;
        if (ckpt) {
          RangeRequest kept{Phase::kForward, true, st.first_layer, st.first_layer + r, false};
          RangeRequest rest{Phase::kForward, false, st.first_layer + r, st.end_layer, false};
          kept.gathered_forward = rest.gathered_forward = gathered;
          TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, kept));
          TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, rest));
          for (int rep : replicas) e_.pending_recompute.insert(key(rep));
        } else {
          RangeRequest fwd{Phase::kForward, false, st.first_layer, st.end_layer, false, 0, 0, TimeParts(s, c, mb, it)};
          fwd.gathered_forward = gathered;
          TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, fwd));
        }
        if (g < last_g) {
          for (LaneState& ls : lanes) {
            EmitSend(e_, ls, Phase::kForward, g + 1, (g + 1) % e_.pp, BoundaryBytes(e_, ls.lane, st.end_layer));
          }
        }
        for (int rep : replicas) last_forward_[{s, rep}] = before;
        break;
      }
      case PipelineOp::Kind::kRecompute:
        if (e_.pending_recompute.erase(key(replicas.front())) > 0) {
          for (size_t i = 1; i < replicas.size(); ++i) e_.pending_recompute.erase(key(replicas[i]));
          TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, {Phase::kRecompute, false, st.first_layer, st.first_layer + r, false}));
        }
        break;
      case PipelineOp::Kind::kBackward: {
        bool recompute = e_.pending_recompute.erase(key(replicas.front())) > 0;
        for (size_t i = 1; i < replicas.size(); ++i) e_.pending_recompute.erase(key(replicas[i]));
        // Interleaved: each checkpointed layer is recomputed inside the backward, before its own.
        const bool interleaved = recompute && e_.opt.recompute_interleaved;
        if (interleaved) recompute = false;
        if (recompute && !e_.opt.recompute_after_gradient) {
          TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, {Phase::kRecompute, false, st.first_layer, st.first_layer + r, false}));
          ClearFrontiers(lanes);
        }
        if (g < last_g) {
          for (LaneState& ls : lanes) {
            EmitRecv(e_, ls, Phase::kBackward, g, (g + 1) % e_.pp, BoundaryBytes(e_, ls.lane, st.end_layer));
          }
        }
        if (recompute && e_.opt.recompute_after_gradient) {
          TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, {Phase::kRecompute, false, st.first_layer, st.first_layer + r, false}));
        }
        const bool final = e_.IsFinalBackward(s, replicas.front(), k);
        RangeRequest back{Phase::kBackward, false, st.first_layer, st.end_layer, final};
        if (interleaved) {
          back.recompute_first = st.first_layer;
          back.recompute_end = st.first_layer + r;
        }
        TESTBED_RETURN_IF_ERROR(EmitRange(e_, lanes, back));
        if (g > 0) {
          for (LaneState& ls : lanes) {
            EmitSend(e_, ls, Phase::kBackward, g - 1, (g - 1) % e_.pp, BoundaryBytes(e_, ls.lane, st.first_layer));
          }
        }
        break;
      }
      case PipelineOp::Kind::kOptimizerStep:
        OptimizerStep(s, replicas, it);
        break;
    }
    return absl::OkStatus();
  }

  // Parts of the time steps the first forward of an iteration runs in, each waiting for its
  // embedding rows (ExpandOptions::embedding_priority_parts): where the embedding's rows are
  // exchanged sparse with the untouched ones fetched early, and it feeds a one-directional
  // LSTM, which reads its first steps' rows first.
  int TimeParts(int s, int c, int mb, int it) const {
    const ExpandOptions& o = e_.opt;
    if (!SparseEmbedding(e_, 0) || !o.embedding_prefetch || o.embedding_priority_parts < 2 || s != 0 || c != 0 ||
        mb != 0 || it == 0 || e_.plan.dp(0) < 2 || e_.model.layers.size() < 2) {
      return 1;
    }
    const Layer& next = e_.model.layers[1];
    return next.kind == LayerKind::kLstm && next.lstm_directions == 1 ? o.embedding_priority_parts : 1;
  }

  // The optimizer kernels of one step; what they wait for is added by the gradient-sync pass.
  void OptimizerStep(int s, const std::vector<int>& replicas, int iteration) {
    const bool adam = e_.ctx.train.optimizer == "adam";
    const int dp = e_.plan.dp(s);
    for (int rep : replicas) {
      const double params = e_.OwnedParams(s, rep) / (e_.plan.zero_stage >= 1 ? dp : 1);
      KernelWork w;
      w.op = KernelOp::kOptimizerStep;
      // Mixed-precision Adam: ~12 FLOPs and 28 bytes of state traffic per parameter (fp32
      // master, m, v read and written, fp16 gradient read, fp16 weight written).
      w.flops = params * (adam ? 12.0 : 3.0);
      w.bytes = params * (adam ? 28.0 : 16.0);
      // FP8 training: the updated weights cast to FP8 with their transpose (read 2 bytes,
      // write 1 + 1), on every rank for all the weights it runs (Transformer Engine does it in
      // the first micro-batch's forward; the traffic is the same).
      if (e_.ctx.train.precision == Precision::kFp8) w.bytes += e_.OwnedParams(s, rep) * 4.0;
      w.precision = Precision::kFp32;
      const std::int32_t work = e_.sched.AddWork(w);
      for (int t = 0; t < e_.plan.tp(s); ++t) {
        Task k;
        k.kind = TaskKind::kKernel;
        k.device = e_.Dev(rep, s, t);
        k.stage = s;
        k.replica = rep;
        k.iteration = iteration;
        k.work = work;
        e_.optimizer_task[{iteration, k.device}] = e_.sched.Add(k);
      }
    }
  }

  Expansion& e_;
  std::vector<LaneState> lanes_;  // the current op's lanes (Lanes)
  std::map<std::pair<int, int>, TaskId> last_forward_;  // (stage, replica) -> first task of its last forward
  std::set<std::tuple<int, int, int, int>> gathered_;  // (iteration, stage, replica, chunk) whose first forward is emitted
};

}  // namespace

absl::Status ComputePass(Expansion& e) {
  Walker w(e);
  std::vector<int> group_size(static_cast<size_t>(e.pp), 1);
  int groups = 0;
  for (int s = 0; s < e.pp; ++s) {
    // Expert- and context-parallel groups are both consecutive replicas; where a stage has
    // both, its lock-step groups are the blocks of their least common multiple (an EP group
    // may span CP groups and the other way round), and the layer hooks run each EP or CP
    // group of a block on its own.
    const int ep = StageHasExpertParallelism(e, s) ? e.plan.experts.degree : 1;
    group_size[static_cast<size_t>(s)] = std::lcm(ep, e.plan.cp());
    groups = std::max(groups, e.plan.dp(s) / group_size[static_cast<size_t>(s)]);
  }
  // Replica 0 walks; where every replica walks alike, the others are its copies.
  const bool alike = ReplicaCopyOn() && groups > 1 && ReplicasAlike(e);
  const TaskId first = static_cast<TaskId>(e.sched.size());
  for (int g = 0; g < groups; ++g) {
    if (g == 1 && alike) {
      std::optional<ReplicaCopier> copier = ReplicaCopier::From(e, first, static_cast<TaskId>(e.sched.size()));
      while (copier && g < groups && copier->Copy(g)) ++g;
      if (g == groups) break;  // else replica g on are walked
    }
    for (int s = 0; s < e.pp; ++s) {
      const int size = group_size[static_cast<size_t>(s)];
      if (g >= e.plan.dp(s) / size) continue;
      std::vector<int> replicas;
      for (int r = g * size; r < (g + 1) * size; ++r) replicas.push_back(r);
      TESTBED_RETURN_IF_ERROR(w.Group(s, replicas));
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
