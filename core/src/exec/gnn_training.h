// Real training of a family "gnn" model (backend "real"): mini-batches sampled as the
// simulator samples them (graph/batch_stream.h), each data-parallel replica's feature rows
// brought to its device only by the run's feature loader (graph/device_rows.h), the model
// (exec/gnn_stack.h) reading its input rows from there. Measured per step: the bytes copied
// host to device, the rows resident, the loader's duplicate-detection time, the copies' time
// and the step's wall time.
#pragma once

#include "absl/status/statusor.h"
#include "config/run_config.h"
#include "engine/backend.h"
#include "testbed/metrics.h"
#include "testbed/registry.h"

namespace testbed::exec {

// Trains `run`'s gnn model on the graph its feature_loader names: dp replicas as ranks of the
// run's communicator (threads with local, processes under mpirun; exec/gnn_replica.h), their
// gradients all-reduced every step (synchronous data parallelism). InvalidArgument without a
// feature_loader, for a Planetoid graph whose features are not [model] inputs wide, for a
// batch that does not divide over the replicas, or for [real] loss or delay other than
// cross_entropy and 0; Unimplemented for [real] device = "cuda". Of the other [real] keys it
// honours momentum (optimizer sgd) and weight_decay.
[[nodiscard]] absl::StatusOr<RunOutput> TrainGnn(const ResolvedRun& run, const Registry& registry,
                                                 const RunControl& control);

}  // namespace testbed::exec
