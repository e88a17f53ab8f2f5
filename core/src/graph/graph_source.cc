#include "graph/graph_source.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/data_files.h"
#include "testbed/train/rng.h"

namespace testbed {
namespace {

// The first round(fraction x n) vertices of a permutation drawn by `seed`, ascending (>= 1).
std::vector<std::int64_t> DrawSeeds(std::int64_t n, double fraction, std::uint64_t seed) {
  train::Rng rng(seed);
  std::vector<std::int64_t> order = rng.Permutation(n);
  const auto keep = std::clamp<std::int64_t>(std::llround(fraction * static_cast<double>(n)), 1, n);
  order.resize(static_cast<size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace

absl::StatusOr<SourceGraph> LoadSourceGraph(const GraphSource& source, const std::string& owner) {
  SourceGraph out;
  auto fail = [&](const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat(owner, ".graph = \"", source.graph, "\": ", st.message()));
  };
  if (source.graph == "cora" || source.graph == "citeseer") {
    absl::StatusOr<std::string> edges = FindData(absl::StrCat("graphs/", source.graph, "/edges.csv.gz"));
    if (!edges.ok()) return fail(edges.status());
    const std::string dir = edges->substr(0, edges->size() - std::string("/edges.csv.gz").size());
    absl::StatusOr<train::GraphDataset> data = train::LoadPlanetoid(dir, source.graph);
    if (!data.ok()) return fail(data.status());
    out.graph = std::move(data->graph);
    out.seeds = std::move(data->train);
    out.features = std::move(data->features);
    out.labels = std::move(data->labels);
    out.classes = data->classes;
    out.test = std::move(data->test);
    std::sort(out.seeds.begin(), out.seeds.end());
    out.description = absl::StrCat(source.graph, " (", out.graph.vertices, " vertices, ", out.graph.edges(),
                                   " edges, its training split)");
    return out;
  }
  if (source.graph == "rmat") {
    train::RmatOptions options;
    options.seed = source.graph_seed;
    absl::StatusOr<train::Graph> g = train::GenerateRmat(source.vertices, source.edges, options);
    if (!g.ok()) return fail(g.status());
    out.graph = std::move(*g);
    out.generated = true;
    out.description = absl::StrFormat("generated R-MAT (%d vertices, %d edges, seed %d)", out.graph.vertices,
                                      out.graph.edges(), source.graph_seed);
  } else {
    absl::StatusOr<train::Graph> g = train::ReadEdgeList(source.graph, source.vertices);
    if (!g.ok()) return fail(g.status());
    out.graph = std::move(*g);
    out.description = absl::StrCat(source.graph, " (", out.graph.vertices, " vertices, ", out.graph.edges(), " edges)");
  }
  out.seeds = DrawSeeds(out.graph.vertices, source.train_fraction, source.graph_seed);
  return out;
}

}  // namespace testbed
