// Plugin "casq": the `casq` compressor (cluster-aware sketch quantization).
#include "casq_compressor.h"
#include "element_rules.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::casq {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Compressor>(
      "casq", "CASQ: k-means clusters of the value distribution share 2^bits buckets by their statistics; "
              "stochastic rounding to bits-wide codes; all-gather",
      {
          ParamSpec::Int("bits", 2).Range(1, kMaxBits).Unit("bits").Doc("code width; 2^bits quantisation buckets"),
          ParamSpec::Int("clusters", 4).Range(1, 256).Doc("k-means clusters of the value distribution (at most 2^bits)"),
          ParamSpec::Int("histogram_bins", 1024).Range(16, kMaxHistogramBins).Doc("resolution of the value histogram the clustering runs on"),
          ParamSpec::Int("kmeans_iterations", 20).Range(0, 1000).Doc("Lloyd iterations at most"),
          ParamSpec::Choice("positions", "auto", {"auto", "dense", "bitmap"})
              .Doc("code every value, or only the non-zeros located by a bitmap; auto picks the smaller"),
          ParamSpec::Int("seed", 1).Min(0).Doc("seed of the stochastic rounding (mixed with rank and step)"),
          ParamSpec::Int("elements", 0).Min(0).Unit("values").Doc("gradient length; 0 takes it from the first encode"),
          ParamSpec::Choice("device", "cpu", {"cpu", "cuda"}).Doc("where encode and decode run"),
          ParamSpec::Choice("codebook", "clustered", {"clustered", "uniform"})
              .Doc("clustered: CASQ's cluster-aware levels; uniform: evenly spaced levels (the baseline)"),
      },
      [](const ParamSet& ps) -> absl::StatusOr<std::unique_ptr<Compressor>> {
        CasqParams p;
        TESTBED_ASSIGN_OR_RETURN(std::int64_t bits, ps.Get<std::int64_t>("bits"));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t clusters, ps.Get<std::int64_t>("clusters"));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t bins, ps.Get<std::int64_t>("histogram_bins"));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t iterations, ps.Get<std::int64_t>("kmeans_iterations"));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t seed, ps.Get<std::int64_t>("seed"));
        TESTBED_ASSIGN_OR_RETURN(p.elements, ps.Get<std::int64_t>("elements"));
        const absl::StatusOr<std::string> positions = ps.Get<std::string>("positions");
        if (!positions.ok()) return positions.status();
        const absl::StatusOr<std::string> device = ps.Get<std::string>("device");
        if (!device.ok()) return device.status();
        p.bits = static_cast<int>(bits);
        p.clusters = static_cast<int>(clusters);
        p.histogram_bins = static_cast<int>(bins);
        p.kmeans_iterations = static_cast<int>(iterations);
        p.seed = static_cast<std::uint64_t>(seed);
        p.positions = *positions == "dense"    ? PositionPolicy::kDense
                      : *positions == "bitmap" ? PositionPolicy::kBitmap
                                               : PositionPolicy::kAuto;
        p.use_cuda = *device == "cuda";
        const absl::StatusOr<std::string> codebook = ps.Get<std::string>("codebook");
        if (!codebook.ok()) return codebook.status();
        p.uniform = *codebook == "uniform";
        TESTBED_ASSIGN_OR_RETURN(auto made, CasqCompressor::Create(p));
        return std::unique_ptr<Compressor>(std::move(made));
      });
}

}  // namespace
}  // namespace testbed::casq

TESTBED_PLUGIN("casq", "1.0.0", "CASQ cluster-aware sketch quantization (gradient compression)", testbed::casq::Register)
