// Plugin "dpc" (precision_policy): DPC, decreasing precision with layer capacity. Each layer's
// weights and activations get a width from its capacity alone (dpc_rule.h); the first and
// last layers stay wide.
#include "dpc_rule.h"

#include "absl/strings/str_cat.h"
#include "testbed/plugin.h"
#include "testbed/precision_policy.h"
#include "testbed/status_macros.h"

namespace testbed::dpc {
namespace {

class Dpc final : public PrecisionPolicy {
 public:
  explicit Dpc(DpcRule rule) : rule_(std::move(rule)) {}
  absl::StatusOr<std::vector<LayerPrecision>> Assign(const RefineContext& ctx) override {
    return AssignWidths(ctx.planning.model, rule_);
  }

 private:
  DpcRule rule_;
};

absl::Status Register(Registry& r) {
  return r.Add<PrecisionPolicy>(
      "dpc", "DPC: bit widths decreasing with layer capacity, from the model alone",
      {
          ParamSpec::Choice("capacity", "params", {"params", "params_per_output"})
              .Doc("a layer's capacity: its parameter count, or parameters per output feature (about the fan-in)"),
          ParamSpec::Choice("map", "log_range", {"log_range", "quantile", "threshold"})
              .Doc("capacity -> rung: equal intervals of log capacity, equal shares of the ranked layers, or the "
                   "given thresholds"),
          ParamSpec::IntList("ladder", {8, 6, 4}).Unit("bits").Doc("widths from the widest to the narrowest rung"),
          ParamSpec::DoubleList("thresholds", {}).Unit("capacity")
              .Doc("map = \"threshold\": ladder size - 1 increasing capacities between the rungs"),
          ParamSpec::Bool("keep_edges", true).Doc("keep the first and last layer with matrix products at edge_bits"),
          ParamSpec::Int("edge_bits", 8).Range(2, 32).Unit("bits").Doc("width of the kept layers"),
          ParamSpec::StringList("keep", {}).Doc("more layers (by name) kept at edge_bits"),
          ParamSpec::Int("gradient_bits", 0).Range(0, 32).Unit("bits").Doc("every layer's gradient width; 0: the run's precision"),
      },
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<PrecisionPolicy>> {
        ParamReader read(p, "dpc");
        DpcRule rule;
        rule.capacity = read.Get<std::string>("capacity");
        rule.map = read.Get<std::string>("map");
        const auto ladder = read.Get<std::vector<std::int64_t>>("ladder");
        rule.thresholds = read.Get<std::vector<double>>("thresholds");
        rule.keep_edges = read.Get<bool>("keep_edges");
        const std::int64_t edge = read.Get<std::int64_t>("edge_bits");
        rule.keep = read.Get<std::vector<std::string>>("keep");
        const std::int64_t grad = read.Get<std::int64_t>("gradient_bits");
        TESTBED_RETURN_IF_ERROR(read.status());
        rule.ladder.clear();
        for (size_t i = 0; i < ladder.size(); ++i) {
          if (ladder[i] < 2 || ladder[i] > 32) {
            return absl::InvalidArgumentError(
                absl::StrCat("dpc: ladder[", i, "] = ", ladder[i], " bits; expected 2 to 8, 16 or 32"));
          }
          rule.ladder.push_back(static_cast<int>(ladder[i]));
        }
        rule.edge_bits = static_cast<int>(edge);      // 2..32 by its declared range
        rule.gradient_bits = static_cast<int>(grad);  // 0..32 by its declared range
        TESTBED_RETURN_IF_ERROR(CheckRule(rule));
        return std::make_unique<Dpc>(std::move(rule));
      });
}

}  // namespace
}  // namespace testbed::dpc

TESTBED_PLUGIN("precision_dpc", "1.0.0", "DPC: decreasing precision with layer capacity", testbed::dpc::Register)
