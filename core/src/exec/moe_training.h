// Real training of a family "moe-gpt" model on the shipped text (backend "real"): dp
// data-parallel replicas as ranks of the run's communicator, each MoE layer run with expert
// parallelism over all of them when [parallel] ep = dp (each rank gates its own tokens and
// exchanges them with the experts' holders by all-to-all-v, testbed/train/expert_parallel_moe.h)
// or whole on every rank when ep = 1. With a load_balancer, each iteration's placement of
// expert copies is the balancer's answer to the previous iteration's measured routing.
// Measured per step: the loss, the tokens each rank routed to each expert of each MoE layer
// (optionally written as a routing trace, testbed/routing_trace.h) and the balance degree of
// the tokens each rank computed.
//
// Under expert parallelism only an expert's owner updates it (and keeps its optimizer
// state): the shared parameters' gradients are summed over the ranks, each copy's gradients
// of an expert are sent to its owner (Agg), and before an iteration every copy receives its
// owner's weights (Trans), by point-to-point messages. What differs from a production system:
// every rank allocates every expert's weights (those it neither owns nor copies stay stale and
// unused), and the layers are dropless (no capacity factor).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "config/run_config.h"
#include "engine/backend.h"
#include "exec/executor.h"
#include "testbed/metrics.h"
#include "testbed/model_graph.h"
#include "testbed/registry.h"

namespace testbed::exec {

struct MoeTrainingOptions {
  const ModelGraph* graph = nullptr;  // the vocabulary set to the corpus's
  BatchSource source;                 // the global batch of each step (the same on every rank)
  double momentum = 0.9;
  double weight_decay = 0;
  std::string routing_trace;  // "" or the HDF5 file the measured routing is written to
};

// InvalidArgument for ep other than 1 or dp, tp or pp above 1, a load balancer without
// expert parallelism, or a batch that does not divide over the replicas.
[[nodiscard]] absl::StatusOr<RunOutput> TrainMoe(const ResolvedRun& run, const Registry& registry,
                                                 const RunControl& control, const MoeTrainingOptions& options);

}  // namespace testbed::exec
