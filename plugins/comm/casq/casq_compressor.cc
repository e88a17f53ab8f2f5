#include "casq_compressor.h"

#include <array>
#include <bit>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "element_rules.h"
#include "quantizer.h"
#if defined(TESTBED_CASQ_HAS_CUDA)
#include "casq_cuda.h"
#endif

namespace testbed::casq {
namespace {

constexpr std::uint64_t kFormat = PayloadFormatTag("casq/1");
constexpr char kLayout[] = "layout";
constexpr char kCodebook[] = "codebook";
constexpr char kBitmap[] = "bitmap";
constexpr char kCodes[] = "codes";

std::array<AgreementField, 6> Fields(std::int64_t elements, const CasqParams& p) {
  return {{{"format", kFormat},
           {"elements", static_cast<std::uint64_t>(elements)},
           {"bits", static_cast<std::uint64_t>(p.bits)},
           {"clusters", static_cast<std::uint64_t>(p.clusters)},
           {"seed", p.seed},
           {"codebook", p.uniform ? 1u : 0u}}};
}

std::int64_t CodeWords(std::int64_t count, int bits) {
  const std::int64_t per_word = CodesPerWord(bits);
  return (count + per_word - 1) / per_word;
}

// Checks one rank's payload and returns a view of it; `r` names the rank in errors.
absl::StatusOr<RankView> View(const Payload& p, std::size_t r, std::int64_t n, const CasqParams& params) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("casq: payload of rank ", r, ": ", what));
  };
  if (absl::Status s = CheckAgreementPart(p, Fields(n, params)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("casq: payload of rank ", r, ": ", s.message()));
  }
  const PayloadPart* layout = p.Find(kLayout);
  const PayloadPart* codebook = p.Find(kCodebook);
  const PayloadPart* bitmap = p.Find(kBitmap);
  const PayloadPart* codes = p.Find(kCodes);
  if (layout == nullptr || codebook == nullptr || bitmap == nullptr || codes == nullptr) return bad("missing part");
  std::span<const std::uint64_t> l = layout->view<std::uint64_t>();
  if (l.size() != 2 || l[0] > 1) return bad("layout must be 2 uint64 words: positions (0 or 1), count");
  RankView v;
  v.positions = static_cast<Positions>(l[0]);
  v.count = static_cast<std::int64_t>(l[1]);
  v.levels = codebook->view<float>();
  v.bitmap = bitmap->view<std::uint64_t>();
  v.codes = codes->view<std::uint64_t>();
  if (static_cast<std::int64_t>(v.levels.size()) != (1ll << params.bits)) {
    return bad(absl::StrCat("codebook needs ", 1ll << params.bits, " float32 levels"));
  }
  for (float level : v.levels) {
    if (!std::isfinite(level)) return bad("codebook has a non-finite level");
  }
  if (v.positions == Positions::kDense) {
    if (v.count != n || !v.bitmap.empty()) return bad(absl::StrCat("dense layout must code all ", n, " values, no bitmap"));
  } else {
    if (static_cast<std::int64_t>(v.bitmap.size()) != (n + 63) / 64 || bitmap->type != DataType::kUInt64) {
      return bad(absl::StrCat("bitmap needs ", (n + 63) / 64, " uint64 words"));
    }
    std::int64_t ones = 0;
    for (std::uint64_t w : v.bitmap) ones += std::popcount(w);
    if (ones != v.count) return bad(absl::StrCat("bitmap marks ", ones, " values, layout says ", v.count));
    if (n % 64 != 0 && (v.bitmap.back() >> (n % 64)) != 0) return bad("bitmap marks values past the gradient's end");
  }
  if (static_cast<std::int64_t>(v.codes.size()) != CodeWords(v.count, params.bits) || codes->type != DataType::kUInt64) {
    return bad(absl::StrCat("codes need ", CodeWords(v.count, params.bits), " uint64 words for ", v.count, " values"));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CasqCompressor>> CasqCompressor::Create(const CasqParams& p) {
  if (p.bits < 1 || p.bits > kMaxBits) {
    return absl::InvalidArgumentError(absl::StrCat("casq: bits = ", p.bits, ", expected 1..", kMaxBits));
  }
  if (p.clusters < 1 || p.clusters > (1 << p.bits)) {
    return absl::InvalidArgumentError(absl::StrCat("casq: clusters = ", p.clusters, ", expected 1..2^bits = ", 1 << p.bits,
                                                   " (every cluster needs a bucket)"));
  }
  if (p.histogram_bins < 16 || p.histogram_bins > kMaxHistogramBins) {
    return absl::InvalidArgumentError(absl::StrCat("casq: histogram_bins = ", p.histogram_bins, ", expected 16..",
                                                   kMaxHistogramBins));
  }
  if (p.kmeans_iterations < 0) return absl::InvalidArgumentError("casq: kmeans_iterations < 0");
  if (p.elements < 0) return absl::InvalidArgumentError("casq: elements < 0");
  if (p.use_cuda) {
#if defined(TESTBED_CASQ_HAS_CUDA)
    if (!CudaDeviceAvailable()) return absl::UnavailableError("casq: device = \"cuda\" but no GPU is usable");
#else
    return absl::UnavailableError("casq: device = \"cuda\" but this build has no CUDA kernels");
#endif
  }
  auto c = std::unique_ptr<CasqCompressor>(new CasqCompressor(p));
  if (p.elements > 0) {
    if (absl::Status s = c->Bind(p.elements); !s.ok()) return s;
  }
  return c;
}

absl::Status CasqCompressor::Bind(std::int64_t elements) {
  if (elements_ != 0) {
    if (elements != elements_) {
      return absl::InvalidArgumentError(absl::StrCat("casq: gradient of ", elements, " values, but this compressor is for ",
                                                     elements_, " (one instance per gradient bucket)"));
    }
    return absl::OkStatus();
  }
  if (elements < 1) return absl::InvalidArgumentError("casq: empty gradient");
  elements_ = elements;
  return absl::OkStatus();
}

absl::Status CasqCompressor::EncodeInto(std::span<const float> gradient, const EncodeContext& context, Payload& payload) {
  if (absl::Status s = Bind(static_cast<std::int64_t>(gradient.size())); !s.ok()) return s;
  EncodeSettings settings;
  settings.bits = params_.bits;
  settings.clusters = params_.clusters;
  settings.kmeans_iterations = params_.kmeans_iterations;
  settings.uniform = params_.uniform;
  settings.histogram_bins = params_.histogram_bins;
  settings.policy = params_.positions;
  settings.stream = StreamKey(params_.seed, static_cast<std::uint64_t>(context.rank), static_cast<std::uint64_t>(context.step));
  EncodedRank e;
  if (params_.use_cuda) {
#if defined(TESTBED_CASQ_HAS_CUDA)
    const std::string err = EncodeRankCuda(gradient.data(), elements_, settings, &e);
    if (!err.empty()) return absl::InternalError(absl::StrCat("casq CUDA encode: ", err));
#endif
  } else {
    e = EncodeRank(gradient, settings);
  }
  if (e.nonfinite > 0) {
    return absl::InvalidArgumentError(absl::StrCat("casq: gradient of rank ", context.rank, " at step ", context.step,
                                                   " has ", e.nonfinite, " non-finite values (NaN or infinity)"));
  }
  // Part ops are not used: CASQ payloads are all-gathered.
  payload.parts.resize(5);
  SetAgreementPart(Fields(elements_, params_), payload.parts[0]);
  PayloadPart& layout = payload.parts[1];
  layout.Reset(kLayout, DataType::kUInt64, ReduceOp::kBitOr, 2);
  layout.view<std::uint64_t>()[0] = static_cast<std::uint64_t>(e.positions);
  layout.view<std::uint64_t>()[1] = static_cast<std::uint64_t>(e.count);
  PayloadPart& codebook = payload.parts[2];
  codebook.Reset(kCodebook, DataType::kFloat32, ReduceOp::kSum, static_cast<std::int64_t>(e.levels.size()));
  std::copy(e.levels.begin(), e.levels.end(), codebook.view<float>().begin());
  PayloadPart& bitmap = payload.parts[3];
  bitmap.Reset(kBitmap, DataType::kUInt64, ReduceOp::kBitOr, static_cast<std::int64_t>(e.bitmap.size()));
  std::copy(e.bitmap.begin(), e.bitmap.end(), bitmap.view<std::uint64_t>().begin());
  PayloadPart& codes = payload.parts[4];
  codes.Reset(kCodes, DataType::kUInt64, ReduceOp::kBitOr, static_cast<std::int64_t>(e.codes.size()));
  std::copy(e.codes.begin(), e.codes.end(), codes.view<std::uint64_t>().begin());
  return absl::OkStatus();
}

absl::Status CasqCompressor::Decode(std::span<const Payload> payloads, const DecodeOptions& options, std::span<float> out) {
  if (options.ranks < 1) return absl::InvalidArgumentError("casq: DecodeOptions.ranks < 1");
  if (static_cast<int>(payloads.size()) != options.ranks) {
    return absl::InvalidArgumentError(absl::StrCat("casq: Decode takes one payload per rank (all-gathered): got ",
                                                   payloads.size(), " for ", options.ranks, " ranks"));
  }
  if (absl::Status s = Bind(static_cast<std::int64_t>(out.size())); !s.ok()) return s;
  // Every payload is checked before `out` is touched.
  std::vector<RankView> views;
  for (std::size_t r = 0; r < payloads.size(); ++r) {
    absl::StatusOr<RankView> v = View(payloads[r], r, elements_, params_);
    if (!v.ok()) return v.status();
    views.push_back(*v);
  }
  const int divisor = options.average ? options.ranks : 1;
  if (params_.use_cuda) {
#if defined(TESTBED_CASQ_HAS_CUDA)
    std::vector<RankPointers> ranks;
    for (const RankView& v : views) {
      ranks.push_back({v.positions, v.count, v.levels.data(), v.bitmap.data(), static_cast<std::int64_t>(v.bitmap.size()),
                       v.codes.data(), static_cast<std::int64_t>(v.codes.size())});
    }
    const std::string err =
        DecodeRanksCuda(ranks.data(), static_cast<int>(ranks.size()), elements_, params_.bits, divisor, out.data());
    if (!err.empty()) return absl::InternalError(absl::StrCat("casq CUDA decode: ", err));
#endif
  } else {
    DecodeRanks(views, params_.bits, divisor, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<CompressionCost> CasqCompressor::Cost(const CompressionQuery& q) const {
  if (absl::Status s = ValidateCompressionQuery(q); !s.ok()) return s;
  const std::int64_t n = q.elements;
  const auto nonzeros = static_cast<std::int64_t>(std::llround(q.density * static_cast<double>(n)));
  const bool sparse = params_.positions == PositionPolicy::kBitmap ||
                      (params_.positions == PositionPolicy::kAuto && PreferBitmap(n, nonzeros, params_.bits));
  const std::int64_t coded = sparse ? nonzeros : n;
  const std::int64_t bitmap_words = sparse ? (n + 63) / 64 : 0;
  const std::int64_t code_words = CodeWords(coded, params_.bits);
  const double levels = 1 << params_.bits;
  CompressionCost c;
  c.transfers.push_back({kAgreementPartName, CollectiveOp::kAllGather, 2 * static_cast<std::int64_t>(std::tuple_size_v<decltype(Fields(0, params_))>) * 8});
  c.transfers.push_back({kLayout, CollectiveOp::kAllGather, 16});
  c.transfers.push_back({kCodebook, CollectiveOp::kAllGather, static_cast<std::int64_t>(4 * levels)});
  c.transfers.push_back({kBitmap, CollectiveOp::kAllGather, 8 * bitmap_words});
  c.transfers.push_back({kCodes, CollectiveOp::kAllGather, 8 * code_words});
  const double dn = static_cast<double>(n);
  const double dc = static_cast<double>(coded);
  // Encode: the scan (bitmap, range), the histogram and the quantisation each read the
  // gradient; quantising compares against the levels, hashes the index and divides once.
  c.encode.flops = 2 * dn + dc * (3 + levels + 12 + 4);
  c.encode.bytes = 3 * 4 * dn + 8.0 * static_cast<double>((n + 63) / 64) + 8.0 * static_cast<double>(code_words);
  // Decode: per rank, read its codes (and bitmap) and add a level into the output.
  const double ranks = q.ranks;
  c.decode.flops = ranks * dc * 3 + dn;
  c.decode.bytes = ranks * (8.0 * static_cast<double>(bitmap_words + code_words) + 8 * dc) + 8 * dn;
  return c;
}

}  // namespace testbed::casq
