// A check over a simulated timeline that no communication starts before the data it carries
// exists, from what each task says it does (its typed fields), not from the dependencies the
// schedule declares: so a scheduler that relaxes dependencies (EmbRace, TriRace, PipeDream-
// 2BW) is held to the data it moves. The rules, for every communication task:
//   - a stage-to-stage send: every compute task of its lane (iteration, stage, replica, chunk,
//     micro-batch) and direction on the sending device that makes what it sends (forward:
//     any; backward: those covering the chunk's first layer, the weights' part of a split
//     backward aside) has ended;
//   - a tensor-parallel all-reduce of a layer: the compute of that layer for the same lane,
//     sub-batch and phase on its members has ended;
//   - a gradient all-reduce or reduce-scatter (data-parallel streams) of layers [a, b) of an
//     iteration: every backward of that iteration on its members that forms a weight gradient
//     of one of those layers has ended;
//   - a sparse embedding gradient exchange (sparse-comm, backward) of an iteration: every
//     member's backward of the embedding (layer 0) of that iteration, the weights' part of a
//     split backward aside, has ended;
//   - a sparse embedding lookup of rows an update changes (sparse-comm, forward; the whole
//     lookup, 0 of 1, or a part of the changed rows, p >= 1 of its parts) of iteration t:
//     the owners' updates of iteration t - weight_versions have ended;
// and, the other way, every compute task of an iteration on a device taking part in that
// iteration's sparse lookups starts after they end (a forward in parts of its time steps,
// part p of P, after the early rows and the changed rows' parts 1..p + 1 of P + 1).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "testbed/schedule.h"

namespace testbed::sim {

struct AuditResult {
  std::int64_t checked = 0;  // (task, producer) pairs held to the rule
};

// FailedPrecondition naming the first communication (or compute) that starts before a task
// whose data it needs ends, and how many do; `start` and `end` are per task (SimResult's).
[[nodiscard]] absl::StatusOr<AuditResult> AuditDataDependencies(const Schedule& schedule, const std::vector<double>& start,
                                                                const std::vector<double>& end);

}  // namespace testbed::sim
