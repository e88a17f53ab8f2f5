#include "exec/layer_precision.h"

#include "absl/strings/str_cat.h"

namespace testbed::exec {

train::LayerQuant EngineQuant(const LayerPrecision& bits, std::uint64_t seed, int layer, int rank) noexcept {
  auto width = [](int b) { return b == 0 ? 32 : b; };
  train::LayerQuant q;
  q.weight_bits = width(bits.weight_bits);
  q.activation_bits = width(bits.activation_bits);
  q.gradient_bits = width(bits.gradient_bits);
  q.gradient_rounding = train::Rounding::kStochastic;
  // SplitMix64 of (seed, layer, rank): independent streams per layer and rank.
  std::uint64_t z = seed ^ (0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(layer) + 1)) ^
                    (0xbf58476d1ce4e5b9ull * (static_cast<std::uint64_t>(rank) + 1));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  q.seed = z ^ (z >> 31);
  return q;
}

absl::Status ApplyLayerPrecision(const Plan& plan, std::uint64_t seed, int rank, train::SequentialModel<float>& model) {
  for (int l = 0; l < model.num_layers(); ++l) {
    const train::LayerQuant q = EngineQuant(plan.LayerBits(l), seed, l, rank);
    if (q.full_precision()) continue;
    if (absl::Status st = model.layer(l).SetQuantization(q); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed::exec
