// PaGraph's static feature cache (Lin et al., SoCC 2020): before training, the features of the
// highest-degree vertices fill the device memory set aside for them and stay there; each
// mini-batch copies only the features of its vertices outside the cache.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace testbed::pagraph {

// The vertices whose features the cache holds: the `rows` of highest degree, ties broken
// by the lower id, ascending by id. All of them when rows >= degrees.size().
[[nodiscard]] std::vector<std::int64_t> CachedVertices(std::span<const std::int64_t> degrees, std::int64_t rows);

}  // namespace testbed::pagraph
