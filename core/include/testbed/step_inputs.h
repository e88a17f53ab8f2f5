// What changes from one training iteration to the next: the tokens each MoE layer routes to
// each expert, where the experts are, the host-to-device copies a feature loader issues, the
// size of sampled mini-batches. Planning components fill it (a load balancer, a feature
// loader, a trace); the schedule's expansion reads it, so that a simulated run of
// `train.steps` iterations sees every iteration's own work.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "testbed/plan.h"

namespace testbed {

// Tokens one MoE layer routes in one micro-batch of one iteration, per expert-parallel rank:
// tokens[rank * experts + e] tokens of `rank` go to expert e (a token routed to k experts
// counts once for each). The same routing holds in every expert-parallel group of the stage.
struct Routing {
  int ranks = 0;
  int experts = 0;
  std::vector<double> tokens;

  [[nodiscard]] double At(int rank, int expert) const {
    return tokens[static_cast<size_t>(rank) * static_cast<size_t>(experts) + static_cast<size_t>(expert)];
  }
};

// A copy between host memory and the devices of one stage replica, before the forward of
// micro-batch `micro_batch` (-1: at the start of the iteration). Every device of the replica
// copies `bytes`.
struct HostTransfer {
  int stage = 0;
  int replica = 0;
  int micro_batch = -1;
  std::int64_t bytes = 0;
  bool to_device = true;
  int host = -1;  // host endpoint of the device's node (-1: the nearest)
};

// The rows of an embedding table one iteration touches, under sparse embedding
// communication over `replicas` data-parallel replicas that own the table's rows in turn
// (row r belongs to replica r mod replicas): rows[i * replicas + j] distinct rows replica i's
// batch looks up that replica j owns (and so sends their gradients to j); stale[i *
// replicas + j] of those the previous iteration updated (any replica's batch named them), so
// that looking them up waits for that update; the others can be fetched early.
struct SparseRows {
  int replicas = 0;
  std::vector<double> rows;
  std::vector<double> stale;
  // The stale rows split by the part of the sequence that first names them: stale_parts[p *
  // replicas^2 + i * replicas + j] for time part p of `parts` (empty: not split).
  int parts = 1;
  std::vector<double> stale_parts;
};

// Where the tokens of a batch come from, when the rows of an embedding table each batch
// touches are drawn (sparse embedding communication): every token drawn from a Zipf law over
// the vocabulary (rank r with probability proportional to 1 / r^exponent; exponent 0 is
// uniform), or sequences cut at random places from a real text's token ids (`corpus`, ids
// ranked by frequency, rank 0 the most frequent). Deterministic given the seed.
struct TokenModel {
  enum class Kind : std::uint8_t { kZipf, kCorpus };
  Kind kind = Kind::kZipf;
  double zipf_exponent = 1.0;
  std::vector<std::int32_t> corpus;
  std::uint64_t seed = 1;
};

struct StepInput {
  std::map<int, Routing> routing;            // by MoE layer; absent: tokens spread evenly over experts
  std::map<int, ExpertPlacement> placement;  // by MoE layer; overrides the plan's for this iteration
  std::vector<HostTransfer> copies;
  // Samples (rows) per micro-batch that a layer processes this iteration, by layer (sampled
  // GNN mini-batches); absent: the plan's micro-batch.
  std::map<int, std::int64_t> layer_samples;
  // By embedding layer: the rows this iteration's batches touch (sparse embedding
  // communication); absent: every replica touches every row.
  std::map<int, SparseRows> embedding_rows;
};

struct StepInputs {
  std::vector<StepInput> steps;  // by iteration; missing iterations take the defaults

  [[nodiscard]] const StepInput& At(int iteration) const {
    static const StepInput kNone;
    return iteration >= 0 && static_cast<size_t>(iteration) < steps.size() ? steps[static_cast<size_t>(iteration)] : kNone;
  }
  [[nodiscard]] StepInput& Mutable(int iteration) {
    if (steps.size() <= static_cast<size_t>(iteration)) steps.resize(static_cast<size_t>(iteration) + 1);
    return steps[static_cast<size_t>(iteration)];
  }
  [[nodiscard]] bool empty() const noexcept { return steps.empty(); }
};

}  // namespace testbed
