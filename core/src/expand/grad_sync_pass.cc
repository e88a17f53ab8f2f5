// Pass 4: gradient synchronisation, per iteration. For every stage and shard of its layers:
// the buckets' all-reduce (reduce-scatter under ZeRO) over the devices holding the same
// shard (the data-parallel replicas, and under a per-layer degree the groups a replica's
// devices form), each starting when its layers' final backward is done (or after the whole
// backward without dp_overlap); compressed layers go through the compressor's encode,
// transfers and decode instead. Then the tied embedding and head weights (Megatron-LM
// all-reduces their gradients between the first and the last stage) and, under expert
// parallelism, the expert gradients: copies reduced back to their owner, owners all-reduced
// across expert-parallel groups. Every task is recorded as a gradient the optimizer step of
// its devices waits for.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "expand/expansion.h"
#include "expand/moe_routing.h"
#include "expand/param_gather.h"
#include "testbed/status_macros.h"

namespace testbed::expand {
namespace {

class GradientSync {
 public:
  GradientSync(Expansion& e, int iteration) : e_(e), it_(iteration) {}

  absl::Status Run() {
    // Bucket by bucket, in the order their gradients become final, each over its shards.
    for (int s = 0; s < e_.pp; ++s) {
      for (const Bucket& b : e_.buckets[static_cast<size_t>(s)]) {
        const int tp = e_.plan.LayerTp(b.layers.front());
        for (int t = 0; t < tp; ++t) {
          const std::vector<DeviceId> members = Members(s, t, tp);
          if (members.size() < 2) continue;
          if (b.compressed) {
            TESTBED_RETURN_IF_ERROR(Compressed(s, b.layers.front(), members));
          } else {
            Plain(s, b, members);
          }
        }
      }
    }
    TiedEmbedding();
    for (int s = 0; s < e_.pp; ++s) Experts(s);
    return absl::OkStatus();
  }

 private:
  // Devices holding shard t of a layer of degree `tp` on stage s: every replica's, and every
  // group of `tp` devices within a replica.
  std::vector<DeviceId> Members(int s, int t, int tp) const {
    std::vector<DeviceId> out;
    const int T = e_.plan.tp(s);
    for (int d = 0; d < e_.plan.dp(s); ++d) {
      for (int k = 0; k < T / tp; ++k) out.push_back(e_.Dev(d, s, k * tp + t));
    }
    return out;
  }

  // All-reduce, or reduce-scatter when ZeRO shards the gradients' consumers.
  [[nodiscard]] CollectiveOp GradientOp() const {
    return e_.plan.zero_stage >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  }

  void Ready(TaskId id, const std::vector<DeviceId>& devices) {
    for (DeviceId d : devices) e_.gradients_ready[{it_, d}].push_back(id);
  }

  TaskId Add(Task t, std::vector<TaskId> deps) {
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    deps.erase(std::remove(deps.begin(), deps.end(), -1), deps.end());
    t.iteration = it_;
    return e_.sched.Add(t, deps);
  }

  // Under a split of the weights over link classes (HSDP) the bucket's gradients take the same
  // split: one reduce-scatter per class, each pinned to it, on its own stream.
  void Plain(int s, const Bucket& b, const std::vector<DeviceId>& members) {
    std::map<std::uint8_t, std::pair<ParamPiece, double>> per_stream;
    for (int l : b.layers) {
      const double bytes = e_.ReplicatedParams(l) * e_.GradientElementBytes(l);
      for (const ParamPiece& piece : ShardsParameters(e_, s) ? PiecesOf(e_.plan, l) : std::vector<ParamPiece>{ParamPiece{}}) {
        auto& [p, total] = per_stream.try_emplace(piece.scatter_stream, piece, 0.0).first->second;
        total += piece.share * bytes;
      }
    }
    for (const auto& [stream, piece_bytes] : per_stream) PlainOn(s, b, members, piece_bytes.first, piece_bytes.second);
  }

  void PlainOn(int s, const Bucket& b, const std::vector<DeviceId>& members, const ParamPiece& piece, double bytes) {
    Task coll = GroupTask(GradientOp(), piece.scatter_stream, e_.sched.Group(members), s,
                          *std::min_element(b.layers.begin(), b.layers.end()),
                          *std::max_element(b.layers.begin(), b.layers.end()) + 1, static_cast<std::int64_t>(bytes));
    coll.links = piece.links;
    std::vector<TaskId> deps;
    for (DeviceId d : members) {
      if (e_.opt.dp_overlap) {
        for (int l : b.layers) deps.push_back(e_.FinalBackward(it_, d, l));
      } else {
        for (const StageSpec& c : e_.StageAt(s).chunks) {
          for (int l = c.first_layer; l < c.end_layer; ++l) deps.push_back(e_.FinalBackward(it_, d, l));
        }
      }
    }
    Ready(Add(coll, std::move(deps)), members);
  }

  // A compressed layer's gradient exchange: every member encodes after its last backward of
  // the layer, the payload crosses the group in the compressor's collectives, every member
  // decodes; the optimizer waits for the decodes.
  absl::Status Compressed(int s, int l, const std::vector<DeviceId>& members) {
    const GradientCompression& gc = *e_.ctx.compression;
    const Layer& layer = e_.model.layers[static_cast<size_t>(l)];
    CompressionQuery q;
    q.elements = std::max<std::int64_t>(1, (layer.params + (e_.pp > 1 ? layer.shared_params : 0)) / e_.plan.LayerTp(l));
    q.density = layer.kind == LayerKind::kEmbedding ? gc.embedding_density : 1.0;
    q.ranks = static_cast<int>(members.size());
    TESTBED_ASSIGN_OR_RETURN(CompressionCost cost, gc.compressor->Cost(q));
    const std::int32_t group = e_.sched.Group(members);
    auto kernel = [&](KernelOp op, const KernelCost& k, DeviceId d, std::vector<TaskId> deps) {
      Task t;
      t.kind = TaskKind::kKernel;
      // On the gradient-exchange stream, like a DDP communication hook: it runs as soon as
      // the layer's gradient is final, overlapping the rest of the backward pass.
      t.stream = streams::kDataComm;
      t.device = d;
      t.stage = s;
      t.first_layer = l;
      t.end_layer = l + 1;
      t.work = e_.sched.AddWork(KernelWork{op, k.flops, k.bytes, Precision::kFp32});
      return Add(t, std::move(deps));
    };
    std::vector<TaskId> prev;
    for (DeviceId d : members) prev.push_back(kernel(KernelOp::kEncode, cost.encode, d, {e_.FinalBackward(it_, d, l)}));
    for (const WireTransfer& w : cost.transfers) {
      prev = {Add(GroupTask(w.op, streams::kDataComm, group, s, l, l + 1, w.CollectiveBytes(static_cast<int>(members.size()))),
                  prev)};
    }
    for (DeviceId d : members) {
      const TaskId id = kernel(KernelOp::kDecode, cost.decode, d, prev);
      e_.gradients_ready[{it_, d}].push_back(id);
    }
    return absl::OkStatus();
  }

  void TiedEmbedding() {
    int head = -1;
    for (size_t l = 0; l < e_.model.layers.size(); ++l) {
      if (e_.model.layers[l].shared_params > 0) head = static_cast<int>(l);
    }
    if (e_.pp < 2 || head < 0) return;
    const int first = 0, last = e_.pp - 1;
    const int tp_last = e_.plan.tp(last), dp_last = e_.plan.dp(last);
    const auto bytes = static_cast<std::int64_t>(static_cast<double>(e_.model.layers[static_cast<size_t>(head)].shared_params) /
                                                 e_.plan.tp(first) * e_.elem);
    for (int d = 0; d < e_.plan.dp(first); ++d) {
      for (int t = 0; t < e_.plan.tp(first); ++t) {
        const DeviceId a = e_.Dev(d, first, t), b = e_.Dev(d % dp_last, last, t % tp_last);
        Task coll = GroupTask(CollectiveOp::kAllReduce, streams::kDataComm, e_.sched.Group({a, b}), -1, head, head + 1, bytes);
        const TaskId id = Add(coll, {e_.FinalBackward(it_, a, 0), e_.FinalBackward(it_, b, head)});
        Ready(id, {a, b});
      }
    }
  }

  // Expert gradients under expert parallelism: a replicated expert's copies reduce their
  // gradients to its owner (Prophet's Agg), then the owners of the same experts in different
  // expert-parallel groups all-reduce them. Both on the gradient stream: the expert stream
  // carries the next iteration's weight copies, which wait for this iteration's optimizer
  // step and so for these reductions.
  void Experts(int s) {
    const int ep = e_.plan.experts.degree;
    if (ep < 2) return;
    const int groups = e_.plan.dp(s) / ep;
    for (const StageSpec& c : e_.StageAt(s).chunks) {
      for (int l = c.first_layer; l < c.end_layer; ++l) {
        if (!e_.ExpertParallel(l)) continue;
        const Layer& layer = e_.model.layers[static_cast<size_t>(l)];
        const ExpertPlacement p = PlacementFor(e_, it_, l);
        const double per_expert = static_cast<double>(layer.expert_params) * e_.GradientElementBytes(l);
        std::vector<std::vector<TaskId>> owner_ready(static_cast<size_t>(e_.plan.dp(s)));
        for (int g = 0; g < groups; ++g) {
          for (size_t ex = 0; ex < p.owner.size(); ++ex) {
            if (p.replicas[ex].empty()) continue;
            const int owner = g * ep + p.owner[ex];
            std::vector<DeviceId> members = {e_.Dev(owner, s, 0)};
            for (int r : p.replicas[ex]) members.push_back(e_.Dev(g * ep + r, s, 0));
            std::vector<TaskId> deps;
            for (DeviceId d : members) deps.push_back(e_.FinalBackward(it_, d, l));
            const TaskId id = Add(GroupTask(CollectiveOp::kReduce, streams::kDataComm, e_.sched.Group(members), s, l,
                                            l + 1, static_cast<std::int64_t>(per_expert)),
                                  std::move(deps));
            Ready(id, members);
            owner_ready[static_cast<size_t>(owner)].push_back(id);
          }
        }
        if (groups < 2) continue;
        for (int k = 0; k < ep; ++k) {
          const auto owned = std::count(p.owner.begin(), p.owner.end(), k);
          if (owned == 0) continue;
          std::vector<DeviceId> members;
          std::vector<TaskId> deps;
          for (int g = 0; g < groups; ++g) {
            const DeviceId d = e_.Dev(g * ep + k, s, 0);
            members.push_back(d);
            deps.push_back(e_.FinalBackward(it_, d, l));
            const auto& r = owner_ready[static_cast<size_t>(g * ep + k)];
            deps.insert(deps.end(), r.begin(), r.end());
          }
          Ready(Add(GroupTask(GradientOp(), streams::kDataComm, e_.sched.Group(members), s, l, l + 1,
                              static_cast<std::int64_t>(static_cast<double>(owned) * per_expert)),
                    std::move(deps)),
                members);
        }
      }
    }
  }

  Expansion& e_;
  int it_;
};

}  // namespace

absl::Status GradientSyncPass(Expansion& e) {
  for (int it = 0; it < e.iterations; ++it) {
    GradientSync sync(e, it);
    TESTBED_RETURN_IF_ERROR(sync.Run());
    TESTBED_RETURN_IF_ERROR(GatherParameters(e, it));
  }
  return absl::OkStatus();
}

}  // namespace testbed::expand
