#include "testbed/train/graph.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testbed/status_macros.h"
#include "testbed/train/rng.h"
#include "text_file.h"

namespace testbed::train {
namespace {

using Edge = std::pair<std::int64_t, std::int64_t>;

// The data lines of a CSV text: (line number, fields), without blank lines, '#' comments and
// a first line that is a header (its first field not a number).
std::vector<std::pair<int, std::vector<absl::string_view>>> CsvRows(absl::string_view text) {
  std::vector<std::pair<int, std::vector<absl::string_view>>> rows;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    for (auto& f : fields) f = absl::StripAsciiWhitespace(f);
    std::int64_t probe = 0;
    if (rows.empty() && line_no == 1 && !absl::SimpleAtoi(fields.front(), &probe)) continue;  // header
    rows.emplace_back(line_no, std::move(fields));
  }
  return rows;
}

// A vertex id of a row: a whole number in [0, limit) (limit <= 0: any >= 0).
absl::StatusOr<std::int64_t> VertexId(absl::string_view field, const std::string& where, std::int64_t limit) {
  std::int64_t v = 0;
  if (!absl::SimpleAtoi(field, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a vertex id, got \"", field, "\""));
  }
  if (v < 0 || (limit > 0 && v >= limit)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": vertex ", v, " outside [0, ",
                                                   limit > 0 ? absl::StrCat(limit) : std::string("inf"), ")"));
  }
  return v;
}

absl::StatusOr<std::vector<Edge>> ReadEdges(const std::string& path, std::int64_t vertices) {
  TESTBED_ASSIGN_OR_RETURN(std::string text, ReadMaybeGzip(path));
  std::vector<Edge> edges;
  for (const auto& [line, fields] : CsvRows(text)) {
    const std::string where = absl::StrCat(path, ":", line);
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected \"src,dst\", got ", fields.size(), " fields"));
    }
    auto a = VertexId(fields[0], where, vertices);
    if (!a.ok()) return a.status();
    auto b = VertexId(fields[1], where, vertices);
    if (!b.ok()) return b.status();
    edges.emplace_back(*a, *b);
  }
  return edges;
}

}  // namespace

absl::StatusOr<Graph> GraphFromEdges(std::int64_t vertices, const std::vector<Edge>& edges) {
  if (vertices < 0) return absl::InvalidArgumentError("a graph needs vertices >= 0");
  std::vector<Edge> both;
  both.reserve(edges.size() * 2);
  for (const auto& [a, b] : edges) {
    if (a < 0 || b < 0 || a >= vertices || b >= vertices) {
      return absl::InvalidArgumentError(absl::StrCat("edge ", a, " - ", b, " outside the ", vertices, " vertices"));
    }
    if (a == b) continue;
    both.emplace_back(a, b);
    both.emplace_back(b, a);
  }
  std::sort(both.begin(), both.end());
  both.erase(std::unique(both.begin(), both.end()), both.end());
  Graph g;
  g.vertices = vertices;
  g.adjacency.offsets.assign(static_cast<size_t>(vertices) + 1, 0);
  g.adjacency.neighbors.reserve(both.size());
  for (const auto& [a, b] : both) {
    ++g.adjacency.offsets[static_cast<size_t>(a) + 1];
    g.adjacency.neighbors.push_back(b);
  }
  for (size_t v = 0; v < static_cast<size_t>(vertices); ++v) g.adjacency.offsets[v + 1] += g.adjacency.offsets[v];
  return g;
}

absl::StatusOr<Graph> ReadEdgeList(const std::string& path, std::int64_t vertices) {
  auto edges = ReadEdges(path, vertices);
  if (!edges.ok()) return edges.status();
  std::int64_t n = vertices;
  if (n <= 0) {
    for (const auto& [a, b] : *edges) n = std::max({n, a + 1, b + 1});
  }
  return GraphFromEdges(n, *edges);
}

absl::StatusOr<Graph> GenerateRmat(std::int64_t vertices, std::int64_t edges, const RmatOptions& o) {
  if (vertices < 2) return absl::InvalidArgumentError(absl::StrCat("R-MAT: vertices = ", vertices, "; expected >= 2"));
  if (edges < 0) return absl::InvalidArgumentError(absl::StrCat("R-MAT: edges = ", edges, "; expected >= 0"));
  const double d = 1.0 - o.a - o.b - o.c;
  if (o.a < 0 || o.b < 0 || o.c < 0 || d < -1e-12) {
    return absl::InvalidArgumentError("R-MAT: the quadrant probabilities a, b, c must be >= 0 and sum to at most 1");
  }
  int scale = 0;
  while ((std::int64_t{1} << scale) < vertices) ++scale;
  Rng rng(o.seed);
  // Ids shuffled: R-MAT puts the high degrees on the low ids.
  const std::vector<std::int64_t> relabel = rng.Permutation(vertices);
  std::vector<Edge> out;
  out.reserve(static_cast<size_t>(edges));
  for (std::int64_t e = 0; e < edges; ++e) {
    std::int64_t u = 0, v = 0;
    for (int bit = 0; bit < scale; ++bit) {
      const double r = rng.Uniform();
      const int quadrant = r < o.a ? 0 : r < o.a + o.b ? 1 : r < o.a + o.b + o.c ? 2 : 3;
      u = (u << 1) | (quadrant >= 2 ? 1 : 0);
      v = (v << 1) | (quadrant % 2);
    }
    out.emplace_back(relabel[static_cast<size_t>(u % vertices)], relabel[static_cast<size_t>(v % vertices)]);
  }
  return GraphFromEdges(vertices, out);
}

absl::StatusOr<GraphDataset> LoadPlanetoid(const std::string& dir, const std::string& name) {
  const std::filesystem::path root(dir);
  const std::string labels_path = (root / "labels.csv.gz").string(), features_path = (root / "features.csv.gz").string(),
                    edges_path = (root / "edges.csv.gz").string();
  GraphDataset ds;
  ds.name = name;
  // The labels file has one row per vertex: it sets the vertex count.
  TESTBED_ASSIGN_OR_RETURN(std::string labels_text, ReadMaybeGzip(labels_path));
  const auto label_rows = CsvRows(labels_text);
  const auto n = static_cast<std::int64_t>(label_rows.size());
  ds.labels.assign(static_cast<size_t>(n), -1);
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (const auto& [line, fields] : label_rows) {
    const std::string where = absl::StrCat(labels_path, ":", line);
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected \"node,label,split\", got ", fields.size(), " fields"));
    }
    auto v = VertexId(fields[0], where, n);
    if (!v.ok()) return v.status();
    std::int64_t label = 0;
    if (!absl::SimpleAtoi(fields[1], &label) || label < -1) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected a label >= 0 (or -1: none), got \"", fields[1], "\""));
    }
    if (seen[static_cast<size_t>(*v)]++) return absl::InvalidArgumentError(absl::StrCat(where, ": vertex ", *v, " labelled twice"));
    ds.labels[static_cast<size_t>(*v)] = label;
    ds.classes = std::max(ds.classes, label + 1);
    const absl::string_view split = fields[2];
    if (split == "train") {
      ds.train.push_back(*v);
    } else if (split == "val") {
      ds.validation.push_back(*v);
    } else if (split == "test") {
      ds.test.push_back(*v);
    } else if (split != "none") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": split \"", split, "\"; expected train, val, test or none"));
    }
  }
  auto edges = ReadEdges(edges_path, n);
  if (!edges.ok()) return edges.status();
  auto graph = GraphFromEdges(n, *edges);
  if (!graph.ok()) return graph.status();
  ds.graph = std::move(*graph);
  // Features: every vertex once, its non-zero indices.
  TESTBED_ASSIGN_OR_RETURN(std::string features_text, ReadMaybeGzip(features_path));
  const auto feature_rows = CsvRows(features_text);
  if (static_cast<std::int64_t>(feature_rows.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(features_path, ": ", feature_rows.size(), " rows for the ", n,
                                                   " vertices of ", labels_path, "; expected one row per vertex"));
  }
  std::vector<std::vector<std::int64_t>> nonzero(static_cast<size_t>(n));
  std::int64_t dims = 0;
  std::fill(seen.begin(), seen.end(), 0);
  for (const auto& [line, fields] : feature_rows) {
    const std::string where = absl::StrCat(features_path, ":", line);
    if (fields.empty() || fields.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected \"node,indices\""));
    }
    auto v = VertexId(fields[0], where, n);
    if (!v.ok()) return v.status();
    if (seen[static_cast<size_t>(*v)]++) return absl::InvalidArgumentError(absl::StrCat(where, ": vertex ", *v, " listed twice"));
    if (fields.size() < 2) continue;
    for (absl::string_view f : absl::StrSplit(fields[1], ' ', absl::SkipEmpty())) {
      std::int64_t k = 0;
      if (!absl::SimpleAtoi(f, &k) || k < 0 || k >= (std::int64_t{1} << 24)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": feature index \"", f, "\" is not in [0, 2^24)"));
      }
      nonzero[static_cast<size_t>(*v)].push_back(k);
      dims = std::max(dims, k + 1);
    }
  }
  ds.features = Matrix<float>::Zero(n, dims);
  for (std::int64_t v = 0; v < n; ++v) {
    for (std::int64_t k : nonzero[static_cast<size_t>(v)]) ds.features(v, k) = 1.0f;
  }
  return ds;
}

}  // namespace testbed::train
