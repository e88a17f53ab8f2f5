#include "topk_compressor.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "topk_select.h"
#if defined(TESTBED_TOPK_HAS_CUDA)
#include "topk_cuda.h"
#endif

namespace testbed::topk {
namespace {

constexpr std::uint64_t kFormat = PayloadFormatTag("topk/1");
constexpr char kIndices[] = "indices";
constexpr char kValues[] = "values";

std::array<AgreementField, 3> Fields(std::int64_t elements, std::int64_t k) {
  return {{{"format", kFormat},
           {"elements", static_cast<std::uint64_t>(elements)},
           {"k", static_cast<std::uint64_t>(k)}}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<TopKCompressor>> TopKCompressor::Create(const TopKParams& p) {
  if (p.k < 0) return absl::InvalidArgumentError(absl::StrCat("topk: k = ", p.k, " < 0"));
  if (!(p.ratio > 0.0 && p.ratio <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("topk: ratio = ", p.ratio, ", expected (0, 1]"));
  }
  if (p.elements < 0) return absl::InvalidArgumentError("topk: elements < 0");
  if (p.use_cuda) {
#if defined(TESTBED_TOPK_HAS_CUDA)
    if (!CudaDeviceAvailable()) return absl::UnavailableError("topk: device = \"cuda\" but no GPU is usable");
#else
    return absl::UnavailableError("topk: device = \"cuda\" but this build has no CUDA kernels");
#endif
  }
  auto c = std::unique_ptr<TopKCompressor>(new TopKCompressor(p));
  if (p.elements > 0) {
    if (absl::Status s = c->Bind(p.elements); !s.ok()) return s;
  }
  return c;
}

std::int64_t TopKCompressor::KFor(std::int64_t elements) const noexcept {
  const std::int64_t k = params_.k > 0
                             ? params_.k
                             : static_cast<std::int64_t>(std::ceil(params_.ratio * static_cast<double>(elements)));
  return std::clamp<std::int64_t>(k, 1, std::max<std::int64_t>(elements, 1));
}

absl::Status TopKCompressor::Bind(std::int64_t elements) {
  if (elements_ != 0) {
    if (elements != elements_) {
      return absl::InvalidArgumentError(absl::StrCat("topk: gradient of ", elements, " values, but this compressor is for ",
                                                     elements_, " (one instance per gradient bucket)"));
    }
    return absl::OkStatus();
  }
  if (elements < 1) return absl::InvalidArgumentError("topk: empty gradient");
  if (elements > 0xffffffffll) {
    return absl::InvalidArgumentError(absl::StrCat("topk: ", elements, " values exceed the 32-bit indices"));
  }
  if (params_.k > elements) {
    return absl::InvalidArgumentError(absl::StrCat("topk: k = ", params_.k, " exceeds the gradient's ", elements, " values"));
  }
  elements_ = elements;
  k_ = KFor(elements);
  if (params_.error_feedback) residual_.assign(static_cast<std::size_t>(elements), 0.0f);
  return absl::OkStatus();
}

absl::Status TopKCompressor::EncodeInto(std::span<const float> gradient, const EncodeContext& context, Payload& payload) {
  if (absl::Status s = Bind(static_cast<std::int64_t>(gradient.size())); !s.ok()) return s;
  payload.parts.resize(3);
  SetAgreementPart(Fields(elements_, k_), payload.parts[0]);
  // The op is not used: top-k payloads are all-gathered.
  payload.parts[1].Reset(kIndices, DataType::kUInt32, ReduceOp::kBitOr, k_);
  payload.parts[2].Reset(kValues, DataType::kFloat32, ReduceOp::kSum, k_);
  std::span<std::uint32_t> indices = payload.parts[1].view<std::uint32_t>();
  std::span<float> values = payload.parts[2].view<float>();
  std::int64_t nonfinite = 0;
  if (params_.use_cuda) {
#if defined(TESTBED_TOPK_HAS_CUDA)
    const std::string err = SelectTopKCuda(gradient.data(), residual_.empty() ? nullptr : residual_.data(), elements_,
                                           k_, indices.data(), values.data(), &nonfinite);
    if (!err.empty()) return absl::InternalError(absl::StrCat("topk CUDA select: ", err));
#endif
  } else {
    nonfinite = SelectTopK(gradient, residual_, k_, indices, values);
  }
  if (nonfinite > 0) {
    return absl::InvalidArgumentError(absl::StrCat("topk: gradient of rank ", context.rank, " at step ", context.step,
                                                   " has ", nonfinite, " non-finite values (after error feedback)"));
  }
  return absl::OkStatus();
}

absl::Status TopKCompressor::Decode(std::span<const Payload> payloads, const DecodeOptions& options, std::span<float> out) {
  if (options.ranks < 1) return absl::InvalidArgumentError("topk: DecodeOptions.ranks < 1");
  if (static_cast<int>(payloads.size()) != options.ranks) {
    return absl::InvalidArgumentError(absl::StrCat("topk: Decode takes one payload per rank (all-gathered): got ",
                                                   payloads.size(), " for ", options.ranks, " ranks"));
  }
  if (absl::Status s = Bind(static_cast<std::int64_t>(out.size())); !s.ok()) return s;
  // Validate everything before touching `out`, so a bad payload leaves no partial sum.
  for (std::size_t r = 0; r < payloads.size(); ++r) {
    const Payload& p = payloads[r];
    if (absl::Status s = CheckAgreementPart(p, Fields(elements_, k_)); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("topk: payload of rank ", r, ": ", s.message()));
    }
    const PayloadPart* ip = p.Find(kIndices);
    const PayloadPart* vp = p.Find(kValues);
    if (ip == nullptr || vp == nullptr || static_cast<std::int64_t>(ip->view<std::uint32_t>().size()) != k_ ||
        static_cast<std::int64_t>(vp->view<float>().size()) != k_) {
      return absl::InvalidArgumentError(absl::StrCat("topk: payload of rank ", r, " lacks ", k_,
                                                     " uint32 indices and float32 values"));
    }
    std::span<const std::uint32_t> idx = ip->view<std::uint32_t>();
    for (std::int64_t j = 0; j < k_; ++j) {
      const auto i = idx[static_cast<std::size_t>(j)];
      if (i >= static_cast<std::uint64_t>(elements_) || (j > 0 && i <= idx[static_cast<std::size_t>(j - 1)])) {
        return absl::InvalidArgumentError(absl::StrCat("topk: payload of rank ", r, " has index ", i, " at position ", j,
                                                       ": indices must increase and stay below ", elements_));
      }
    }
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (const Payload& p : payloads) {
    std::span<const std::uint32_t> idx = p.Find(kIndices)->view<std::uint32_t>();
    std::span<const float> val = p.Find(kValues)->view<float>();
    for (std::size_t j = 0; j < idx.size(); ++j) out[idx[j]] += val[j];
  }
  if (options.average) {
    const auto d = static_cast<float>(options.ranks);
    for (float& v : out) v /= d;
  }
  return absl::OkStatus();
}

absl::StatusOr<CompressionCost> TopKCompressor::Cost(const CompressionQuery& q) const {
  if (absl::Status s = ValidateCompressionQuery(q); !s.ok()) return s;
  const std::int64_t k = elements_ == q.elements ? k_ : KFor(q.elements);
  const double n = static_cast<double>(q.elements);
  const double kk = static_cast<double>(k);
  const double ranks = q.ranks;
  CompressionCost c;
  c.transfers.push_back({kAgreementPartName, CollectiveOp::kAllGather, 2 * 3 * 8});
  c.transfers.push_back({kIndices, CollectiveOp::kAllGather, 4 * k});
  c.transfers.push_back({kValues, CollectiveOp::kAllGather, 4 * k});
  // Encode: residual += gradient (read 2, write 1), two radix-select histogram passes and one
  // selection pass over the corrected values, k pairs written and k residuals cleared.
  const double feedback = params_.error_feedback ? 1.0 : 0.0;
  c.encode.flops = n * (feedback + 3);
  c.encode.bytes = feedback * 12 * n + 3 * 4 * n + kk * (8 + 4 * feedback);
  // Decode: clear the output, ranks x k scattered read-modify-writes, and the division when
  // averaging (counted always: the simulator cannot know).
  c.decode.flops = ranks * kk + n;
  c.decode.bytes = 4 * n + ranks * kk * (8 + 8);
  return c;
}

}  // namespace testbed::topk
