// Plugin "dense_allreduce": the `none` compressor (no compression, a plain sum all-reduce).
// The plugin is not called "none" because other kinds have components of that name too, and
// plugin names are library and build-target names.
#include "dense_compressor.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::dense {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Compressor>(
      "none", "no compression: the gradient itself, merged by a sum all-reduce",
      {
          ParamSpec::Int("elements", 0).Min(0).Unit("values").Doc("gradient length; 0 takes it from the first encode"),
          ParamSpec::Choice("device", "cpu", {"cpu", "cuda"}).Doc("where encode and decode run"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Compressor>> {
        DenseParams p;
        TESTBED_ASSIGN_OR_RETURN(p.elements, ps.Get<std::int64_t>("elements"));
        const absl::StatusOr<std::string> device = ps.Get<std::string>("device");
        if (!device.ok()) return device.status();
        p.use_cuda = *device == "cuda";
        TESTBED_ASSIGN_OR_RETURN(auto made, DenseCompressor::Create(p));
        return std::unique_ptr<Compressor>(std::move(made));
      });
}

}  // namespace
}  // namespace testbed::dense

TESTBED_PLUGIN("dense_allreduce", "1.0.0", "no gradient compression: the `none` compressor",
               testbed::dense::Register)
