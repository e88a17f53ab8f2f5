// Kind `feature_loader`: in sampling-based GNN training, which vertices' feature rows are
// copied host to device before each mini-batch and which stay on the device for later ones
// (a static cache of hot vertices, the previous batch's features, ...). It runs last in the
// planning chain, on a model of family "gnn".
//
// Version 1 of the interface. A loader is a state machine over one device's sequence of
// mini-batches:
//   Begin(graph) starts over (nothing resident) and returns what to copy before the first
//     batch (a static cache's contents) and what stays resident;
//   Next(batch) takes the next batch's input vertices and returns the rows to copy and the
//     rows kept on the device afterwards.
// With R the rows kept after the previous call (empty before Begin) and (C, K) what a call
// returns, every call must keep: C and K distinct ids; C disjoint from R (a resident row is
// never copied again); every batch vertex in R or C (the batch reads only device rows); K a
// subset of R and C (nothing appears on the device without a copy). The core checks these
// and refuses a loader that breaks one. The rows on the device while a batch trains are
// the batch's and K's (a copy overwrites rows of R that neither needs).
//
// Refine, the same for every loader (defined in the core), builds the graph the parameters
// from FeatureLoaderParams() name, samples each data-parallel replica's mini-batches of the
// run (train.steps iterations of micro_batches x micro_batch seed vertices, the model's
// fanouts), runs Begin and Next over each replica's sequence and fills the step inputs: a
// host-to-device copy of |C| x row_bytes per step, replica and micro-batch (Begin's copies
// happen once before training: reported as feature_setup_copy_bytes, not simulated), and
// per graph layer the work of the sampled batches (StepInput::layer_samples); it sets each
// replica's StageReplica::resident_bytes to the most rows it holds beyond a batch's own
// (whose rows the first layer's activations count) and Plan::iterations_per_epoch, and adds
// the loader's figures to the plan's metrics (feature_copy_bytes_per_step,
// feature_rows_resident_peak, feature_device_bytes_peak, duplicate_detection_s_per_step, ...)
// and the table "feature_steps" (per iteration, over every replica: the bytes copied to the
// devices and the bytes of features the batches read).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/param_set.h"
#include "testbed/param_spec.h"
#include "testbed/plan_refiner.h"

namespace testbed {

inline constexpr int kFeatureLoaderVersion = 1;

// The graph a loader works over, valid from Begin until the next Begin.
struct FeatureGraph {
  std::int64_t vertices = 0;              // vertex ids lie in [0, vertices)
  std::span<const std::int64_t> degrees;  // per vertex: its number of neighbours
  std::int64_t row_bytes = 0;             // bytes of one vertex's feature row (> 0)
  int threads = 1;                        // CPU threads the loader may use (>= 1)
};

// What a loader decides for one call.
struct FeatureLoad {
  std::vector<std::int64_t> copied;  // C: rows copied host to device now, distinct, none resident
  std::vector<std::int64_t> kept;    // K: rows on the device after this batch, for later ones
  double detect_s = 0;               // wall seconds spent finding the batch's resident rows (0: none)
};

// Where the graph comes from and how seeds are drawn: parameters every loader declares
// (FeatureLoaderParams) and reads (GraphSourceFrom).
struct GraphSource {
  // "rmat" (generated: `vertices`, `edges`, `graph_seed`), "cora" or "citeseer" (the shipped
  // Planetoid graphs; their training split gives the seeds), or an edge-list file ("src,dst"
  // lines, plain or .gz; `vertices` 0: one more than the largest id).
  std::string graph = "rmat";
  std::int64_t vertices = 1 << 16;
  std::int64_t edges = 1 << 20;
  std::uint64_t graph_seed = 1;
  // Generated graphs and edge lists: the share of vertices that are training seeds (drawn by
  // graph_seed), as in the papers' splits (Reddit 66%, ogbn-products 8%).
  double train_fraction = 0.66;
  int threads = 1;  // CPU threads for sampling and for the loader (FeatureGraph::threads)
};

// The parameters of GraphSource, declared once for every loader; a loader appends its own.
[[nodiscard]] std::vector<ParamSpec> FeatureLoaderParams();
// Reads them (`owner` names the component in errors).
[[nodiscard]] absl::StatusOr<GraphSource> GraphSourceFrom(const ParamSet& params, const std::string& owner);

// Device memory a loader may fill with rows kept beyond the batch (a static cache, a second
// level of reuse): parameters `budget_mib` and `budget_fraction`, declared once here.
struct FeatureBudget {
  double mib = 1024;    // MiB of device memory
  double fraction = 0;  // > 0: this share of all the graph's rows instead of `mib`

  // The rows that fit on `graph`: floor(fraction x vertices) when fraction > 0, else
  // floor(mib MiB / row_bytes); never more than the graph's vertices.
  [[nodiscard]] std::int64_t Rows(const FeatureGraph& graph) const noexcept;
};
// The two parameters; `what` says what the budget holds (for their docs).
[[nodiscard]] std::vector<ParamSpec> FeatureBudgetParams(const std::string& what);
[[nodiscard]] absl::StatusOr<FeatureBudget> FeatureBudgetFrom(const ParamSet& params, const std::string& owner);

class FeatureLoader : public PlanRefiner {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kFeatureLoader;

  explicit FeatureLoader(GraphSource source) : source_(std::move(source)) {}

  // Starts over on `graph`. InvalidArgument when the loader cannot work on it (a budget
  // smaller than one row where it needs one).
  [[nodiscard]] virtual absl::StatusOr<FeatureLoad> Begin(const FeatureGraph& graph) = 0;
  // The next batch's input vertices: distinct ids, in the order the model reads them.
  [[nodiscard]] virtual absl::StatusOr<FeatureLoad> Next(std::span<const std::int64_t> batch) = 0;

  [[nodiscard]] absl::Status Refine(RefineContext& ctx) final;
  [[nodiscard]] const GraphSource& source() const noexcept { return source_; }

 private:
  GraphSource source_;
};

}  // namespace testbed
