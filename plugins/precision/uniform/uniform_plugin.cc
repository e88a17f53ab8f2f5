// Plugin "uniform" (precision_policy): one width for every layer's weights and activations
// (fp32, the run's 16-bit format, or fake-quantised integers of 2 to 8 bits), one for the
// gradients, and optional per-layer exceptions by name. The baseline DPC is measured against.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "testbed/plugin.h"
#include "testbed/precision_policy.h"
#include "testbed/status_macros.h"

namespace testbed::precision_uniform {
namespace {

absl::Status CheckWidthParam(std::int64_t bits, const std::string& name) {
  if (bits >= 0 && bits <= 32 && SupportedLayerBits(static_cast<int>(bits))) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("uniform: ", name, " = ", bits, " bits; expected 0 (the run's precision), 2 to 8, 16 or 32"));
}

struct Exception {
  std::string layer;
  int bits = 0;
};

class Uniform final : public PrecisionPolicy {
 public:
  Uniform(int bits, int gradient_bits, std::vector<Exception> exceptions)
      : bits_(bits), gradient_bits_(gradient_bits), exceptions_(std::move(exceptions)) {}

  absl::StatusOr<std::vector<LayerPrecision>> Assign(const RefineContext& ctx) override {
    const ModelGraph& model = ctx.planning.model;
    std::vector<LayerPrecision> out(model.layers.size(), LayerPrecision{bits_, bits_, gradient_bits_});
    for (const Exception& e : exceptions_) {
      TESTBED_ASSIGN_OR_RETURN(int l, LayerIndexByName(model, e.layer, "uniform: layer_bits"));
      out[static_cast<size_t>(l)].weight_bits = e.bits;
      out[static_cast<size_t>(l)].activation_bits = e.bits;
    }
    return out;
  }

 private:
  int bits_, gradient_bits_;
  std::vector<Exception> exceptions_;
};

absl::Status Register(Registry& r) {
  return r.Add<PrecisionPolicy>(
      "uniform", "one precision for every layer (fp32, 16-bit, or fake-quantised 2-8-bit integers)",
      {
          ParamSpec::Int("bits", 32).Range(0, 32).Unit("bits").Doc(
              "width of every layer's weights and activations: 32 (fp32), 16 (the run's 16-bit format), 2 to 8 "
              "(integers), 0 (the run's precision)"),
          ParamSpec::Int("gradient_bits", 0).Range(0, 32).Unit("bits").Doc(
              "width of the gradients (stochastic rounding below 32); 0: the run's precision"),
          ParamSpec::StringList("layer_bits", {}).Doc(
              "exceptions as \"layer=bits\" (e.g. \"head=8\"): that layer's weights and activations at that width"),
      },
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<PrecisionPolicy>> {
        ParamReader read(p, "uniform");
        const std::int64_t bits = read.Get<std::int64_t>("bits");
        const std::int64_t gradient_bits = read.Get<std::int64_t>("gradient_bits");
        const auto layer_bits = read.Get<std::vector<std::string>>("layer_bits");
        TESTBED_RETURN_IF_ERROR(read.status());
        TESTBED_RETURN_IF_ERROR(CheckWidthParam(bits, "bits"));
        TESTBED_RETURN_IF_ERROR(CheckWidthParam(gradient_bits, "gradient_bits"));
        std::vector<Exception> exceptions;
        for (const std::string& entry : layer_bits) {
          std::vector<std::string> parts = absl::StrSplit(entry, absl::MaxSplits('=', 1));
          int b = 0;
          if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &b)) {
            return absl::InvalidArgumentError(
                absl::StrCat("uniform: layer_bits entry \"", entry, "\"; expected \"layer=bits\", e.g. \"head=8\""));
          }
          TESTBED_RETURN_IF_ERROR(CheckWidthParam(b, absl::StrCat("layer_bits \"", entry, "\"")));
          exceptions.push_back({parts[0], b});
        }
        return std::make_unique<Uniform>(static_cast<int>(bits), static_cast<int>(gradient_bits),
                                         std::move(exceptions));
      });
}

}  // namespace
}  // namespace testbed::precision_uniform

TESTBED_PLUGIN("precision_uniform", "1.0.0", "uniform per-layer precision", testbed::precision_uniform::Register)
