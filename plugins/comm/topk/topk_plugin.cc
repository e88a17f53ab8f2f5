// Plugin "topk": the `topk` compressor (top-k sparsification with error feedback).
#include "testbed/plugin.h"
#include "testbed/status_macros.h"
#include "topk_compressor.h"

namespace testbed::topk {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Compressor>(
      "topk", "top-k sparsification with error feedback; (index, value) pairs exchanged by all-gather",
      {
          ParamSpec::Int("k", 0).Min(0).Unit("values").Doc("values sent per rank; 0 derives it from ratio"),
          ParamSpec::Double("ratio", 0.01).Range(1e-9, 1).Doc("fraction of the gradient sent when k = 0"),
          ParamSpec::Bool("error_feedback", true).Doc("add what was not sent to the next step's gradient"),
          ParamSpec::Int("elements", 0).Min(0).Unit("values").Doc("gradient length; 0 takes it from the first encode"),
          ParamSpec::Choice("device", "cpu", {"cpu", "cuda"}).Doc("where selection runs"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Compressor>> {
        TopKParams p;
        TESTBED_ASSIGN_OR_RETURN(p.k, ps.Get<std::int64_t>("k"));
        TESTBED_ASSIGN_OR_RETURN(p.ratio, ps.Get<double>("ratio"));
        TESTBED_ASSIGN_OR_RETURN(p.error_feedback, ps.Get<bool>("error_feedback"));
        TESTBED_ASSIGN_OR_RETURN(p.elements, ps.Get<std::int64_t>("elements"));
        const absl::StatusOr<std::string> device = ps.Get<std::string>("device");
        if (!device.ok()) return device.status();
        p.use_cuda = *device == "cuda";
        TESTBED_ASSIGN_OR_RETURN(auto made, TopKCompressor::Create(p));
        return std::unique_ptr<Compressor>(std::move(made));
      });
}

}  // namespace
}  // namespace testbed::topk

TESTBED_PLUGIN("topk", "1.0.0", "top-k sparsification with error feedback (gradient compression)",
               testbed::topk::Register)
