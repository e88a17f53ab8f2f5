#include "testbed/precision_policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

int WidthOf(int bits, Precision run) noexcept { return bits > 0 ? bits : PrecisionBits(run); }

absl::Status CheckWidth(int bits, const Layer& layer, const char* what) {
  if (SupportedLayerBits(bits)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': ", what, " width ", bits,
                                                 " bits; expected 0 (the run's precision), 2 to 8, 16 or 32"));
}

}  // namespace

double ForwardMacsPerSample(const Layer& layer) noexcept { return layer.fwd_flops_per_sample / 2.0; }

double ForwardBitOps(const ModelGraph& model, const std::vector<LayerPrecision>& bits, Precision run_precision) {
  double total = 0;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const LayerPrecision p = l < bits.size() ? bits[l] : LayerPrecision{};
    total += ForwardMacsPerSample(model.layers[l]) * WidthOf(p.weight_bits, run_precision) *
             WidthOf(p.activation_bits, run_precision);
  }
  return total;
}

absl::StatusOr<int> LayerIndexByName(const ModelGraph& model, const std::string& name, const std::string& what) {
  std::vector<std::string> some;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    if (model.layers[l].name == name) return static_cast<int>(l);
    if (some.size() < 4) some.push_back(model.layers[l].name);
  }
  if (model.layers.size() > some.size()) some.emplace_back("...");
  return absl::InvalidArgumentError(absl::StrCat(what, ": model '", model.shape.name, "' has no layer '", name,
                                                 "' (its layers: ", absl::StrJoin(some, ", "), ")"));
}

absl::Status PrecisionPolicy::Refine(RefineContext& ctx) {
  const ModelGraph& model = ctx.planning.model;
  TESTBED_ASSIGN_OR_RETURN(std::vector<LayerPrecision> bits, Assign(ctx));
  if (bits.size() != model.layers.size()) {
    return absl::InternalError(absl::StrCat("assigned widths to ", bits.size(), " of ", model.layers.size(), " layers"));
  }
  const size_t n = model.layers.size();
  Plan& plan = ctx.plan;
  if (plan.layers.size() != n) plan.layers.resize(n);
  const Precision run = ctx.planning.train.precision;
  Table table;
  table.name = "layer_precision";
  std::vector<std::string> names;
  std::vector<std::int64_t> wbits, abits, gbits, params;
  std::vector<double> macs, bitops;
  for (size_t l = 0; l < n; ++l) {
    const Layer& layer = model.layers[l];
    TESTBED_RETURN_IF_ERROR(CheckWidth(bits[l].weight_bits, layer, "weight"));
    TESTBED_RETURN_IF_ERROR(CheckWidth(bits[l].activation_bits, layer, "activation"));
    TESTBED_RETURN_IF_ERROR(CheckWidth(bits[l].gradient_bits, layer, "gradient"));
    plan.layers[l].precision = bits[l];
    names.push_back(layer.name);
    wbits.push_back(WidthOf(bits[l].weight_bits, run));
    abits.push_back(WidthOf(bits[l].activation_bits, run));
    gbits.push_back(WidthOf(bits[l].gradient_bits, run));
    params.push_back(layer.params);
    macs.push_back(ForwardMacsPerSample(layer));
    bitops.push_back(macs.back() * static_cast<double>(wbits.back() * abits.back()));
  }
  table.columns = {{"layer", "", names},          {"weight_bits", "bits", wbits},
                   {"activation_bits", "bits", abits}, {"gradient_bits", "bits", gbits},
                   {"params", "parameters", params},   {"forward_macs_per_sample", "MAC", macs},
                   {"forward_bitops_per_sample", "bit-op", bitops}};
  plan.planner_tables.push_back(std::move(table));
  double ours = 0;
  for (double b : bitops) ours += b;
  std::vector<LayerPrecision> fp32(n, LayerPrecision{32, 32, 32}), int8(n, LayerPrecision{8, 8, 8});
  const double full = ForwardBitOps(model, fp32, run), eight = ForwardBitOps(model, int8, run);
  plan.planner_metrics.Add("forward_bitops_per_sample", ours, "bit-op", Better::kLower);
  if (full > 0) plan.planner_metrics.Add("bitops_vs_fp32", ours / full, "1", Better::kLower);
  if (eight > 0) plan.planner_metrics.Add("bitops_vs_uniform8", ours / eight, "1", Better::kLower);
  return absl::OkStatus();
}

}  // namespace testbed
