#include "dpc_rule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "testbed/precision_policy.h"
#include "testbed/status_macros.h"

namespace testbed::dpc {
namespace {

// A width a rung or the kept layers may have (not 0: they name a width of their own).
bool Supported(int bits) noexcept { return bits != 0 && SupportedLayerBits(bits); }

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("dpc: ", what)); }

// The rung of a ranked layer of capacity `c` among the ranked capacities `all`.
size_t Rung(const DpcRule& rule, double c, const std::vector<double>& all) {
  const size_t rungs = rule.ladder.size();
  if (rule.map == "threshold") {
    size_t k = 0;
    while (k < rule.thresholds.size() && c >= rule.thresholds[k]) ++k;
    return k;
  }
  if (rule.map == "quantile") {
    const auto less = static_cast<double>(std::count_if(all.begin(), all.end(), [c](double x) { return x < c; }));
    return std::min(rungs - 1, static_cast<size_t>(less * static_cast<double>(rungs) / static_cast<double>(all.size())));
  }
  const double lo = std::log(*std::min_element(all.begin(), all.end()));
  const double hi = std::log(*std::max_element(all.begin(), all.end()));
  if (!(hi > lo)) return 0;
  const double t = (std::log(c) - lo) / (hi - lo);
  return std::min(rungs - 1, static_cast<size_t>(t * static_cast<double>(rungs)));
}

}  // namespace

absl::Status CheckRule(const DpcRule& rule) {
  if (rule.capacity != "params" && rule.capacity != "params_per_output") {
    return Bad(absl::StrCat("capacity = \"", rule.capacity, "\"; expected \"params\" or \"params_per_output\""));
  }
  if (rule.map != "log_range" && rule.map != "quantile" && rule.map != "threshold") {
    return Bad(absl::StrCat("map = \"", rule.map, "\"; expected \"log_range\", \"quantile\" or \"threshold\""));
  }
  if (rule.ladder.empty()) return Bad("ladder is empty; expected widths such as [8, 6, 4]");
  for (size_t i = 0; i < rule.ladder.size(); ++i) {
    if (!Supported(rule.ladder[i])) {
      return Bad(absl::StrCat("ladder[", i, "] = ", rule.ladder[i], " bits; expected 2 to 8, 16 or 32"));
    }
    if (i > 0 && rule.ladder[i] >= rule.ladder[i - 1]) {
      return Bad(absl::StrCat("ladder[", i, "] = ", rule.ladder[i], " is not narrower than ladder[", i - 1, "] = ",
                              rule.ladder[i - 1], " (the ladder goes from the widest to the narrowest)"));
    }
  }
  if (!Supported(rule.edge_bits)) return Bad(absl::StrCat("edge_bits = ", rule.edge_bits, "; expected 2 to 8, 16 or 32"));
  if (rule.gradient_bits != 0 && !Supported(rule.gradient_bits)) {
    return Bad(absl::StrCat("gradient_bits = ", rule.gradient_bits, "; expected 0 (the run's precision), 2 to 8, 16 or 32"));
  }
  if (rule.map == "threshold") {
    if (rule.thresholds.size() + 1 != rule.ladder.size()) {
      return Bad(absl::StrCat("map = \"threshold\" needs ", rule.ladder.size() - 1, " thresholds for a ladder of ",
                              rule.ladder.size(), " widths; got ", rule.thresholds.size()));
    }
    for (size_t i = 1; i < rule.thresholds.size(); ++i) {
      if (!(rule.thresholds[i] > rule.thresholds[i - 1])) return Bad("thresholds must increase");
    }
  } else if (!rule.thresholds.empty()) {
    return Bad(absl::StrCat("thresholds are used by map = \"threshold\" only, not \"", rule.map, "\""));
  }
  return absl::OkStatus();
}

double LayerCapacity(const Layer& layer, const std::string& measure) noexcept {
  const double params = static_cast<double>(layer.params);
  if (measure != "params_per_output") return params;
  // Output features per token: the 16-bit output bytes of a sample over its tokens.
  const double tokens = static_cast<double>(std::max<std::int64_t>(1, layer.seq_len));
  const double outputs = static_cast<double>(layer.output_bytes_per_sample) / 2.0 / tokens;
  return outputs > 0 ? params / outputs : params;
}

absl::StatusOr<std::vector<LayerPrecision>> AssignWidths(const ModelGraph& model, const DpcRule& rule) {
  TESTBED_RETURN_IF_ERROR(CheckRule(rule));
  const int n = static_cast<int>(model.layers.size());
  std::vector<LayerPrecision> out(static_cast<size_t>(n), LayerPrecision{0, 0, rule.gradient_bits});
  std::vector<bool> computes(static_cast<size_t>(n)), kept(static_cast<size_t>(n));
  int first = -1, last = -1;
  for (int l = 0; l < n; ++l) {
    computes[static_cast<size_t>(l)] = ForwardMacsPerSample(model.layers[static_cast<size_t>(l)]) > 0;
    if (computes[static_cast<size_t>(l)]) {
      if (first < 0) first = l;
      last = l;
    }
  }
  if (rule.keep_edges && first >= 0) kept[static_cast<size_t>(first)] = kept[static_cast<size_t>(last)] = true;
  for (const std::string& name : rule.keep) {
    TESTBED_ASSIGN_OR_RETURN(int l, LayerIndexByName(model, name, "dpc: keep"));
    kept[static_cast<size_t>(l)] = true;
  }
  std::vector<double> ranked;
  for (int l = 0; l < n; ++l) {
    if (computes[static_cast<size_t>(l)] && !kept[static_cast<size_t>(l)]) {
      ranked.push_back(std::max(1.0, LayerCapacity(model.layers[static_cast<size_t>(l)], rule.capacity)));
    }
  }
  for (int l = 0; l < n; ++l) {
    LayerPrecision& p = out[static_cast<size_t>(l)];
    if (!computes[static_cast<size_t>(l)]) continue;
    int bits = rule.edge_bits;
    if (!kept[static_cast<size_t>(l)]) {
      const double c = std::max(1.0, LayerCapacity(model.layers[static_cast<size_t>(l)], rule.capacity));
      bits = rule.ladder[Rung(rule, c, ranked)];
    }
    p.weight_bits = bits;
    p.activation_bits = bits;
  }
  return out;
}

}  // namespace testbed::dpc
