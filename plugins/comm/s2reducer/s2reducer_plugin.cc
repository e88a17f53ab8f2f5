// Plugin "s2reducer": the `s2reducer` compressor.
#include "s2reducer_compressor.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::s2reducer {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Compressor>(
      "s2reducer", "S2Reducer: OR-merged bitmap of non-zeros + sum-merged count sketch of their values; median decode",
      {
          ParamSpec::Int("rows", 3).Range(1, kMaxRows).Unit("rows").Doc("sketch rows (hash functions); estimate = median over rows"),
          ParamSpec::Int("columns", 0).Range(0, 4294967295.0).Unit("counters").Doc("counters per row; 0 derives it from ratio"),
          ParamSpec::Double("ratio", 8.0).Range(1, 1e9).Doc("gradient bytes / sketch bytes when columns = 0 (the bitmap adds n/8 bytes)"),
          ParamSpec::Int("seed", 1).Min(0).Doc("seed of the row hashes; every rank must use the same"),
          ParamSpec::Int("elements", 0).Min(0).Unit("values").Doc("gradient length; 0 takes it from the first encode"),
          ParamSpec::Choice("device", "cpu", {"cpu", "cuda"}).Doc("where encode and decode run"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Compressor>> {
        S2ReducerParams p;
        TESTBED_ASSIGN_OR_RETURN(std::int64_t rows, ps.Get<std::int64_t>("rows"));
        TESTBED_ASSIGN_OR_RETURN(p.columns, ps.Get<std::int64_t>("columns"));
        TESTBED_ASSIGN_OR_RETURN(p.ratio, ps.Get<double>("ratio"));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t seed, ps.Get<std::int64_t>("seed"));
        TESTBED_ASSIGN_OR_RETURN(p.elements, ps.Get<std::int64_t>("elements"));
        const absl::StatusOr<std::string> device = ps.Get<std::string>("device");
        if (!device.ok()) return device.status();
        p.rows = static_cast<int>(rows);
        p.seed = static_cast<std::uint64_t>(seed);
        p.use_cuda = *device == "cuda";
        TESTBED_ASSIGN_OR_RETURN(auto made, S2ReducerCompressor::Create(p));
        return std::unique_ptr<Compressor>(std::move(made));
      });
}

}  // namespace
}  // namespace testbed::s2reducer

TESTBED_PLUGIN("s2reducer", "1.0.0", "S2Reducer sparse sketch reducer (gradient compression)",
               testbed::s2reducer::Register)
