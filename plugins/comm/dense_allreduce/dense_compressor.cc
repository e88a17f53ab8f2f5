#include "dense_compressor.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "dense_codec.h"
#if defined(TESTBED_DENSE_HAS_CUDA)
#include "dense_cuda.h"
#endif

namespace testbed::dense {
namespace {

constexpr std::uint64_t kFormat = PayloadFormatTag("none/1");
constexpr char kValues[] = "values";

std::array<AgreementField, 2> Fields(std::int64_t elements) {
  return {{{"format", kFormat}, {"elements", static_cast<std::uint64_t>(elements)}}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<DenseCompressor>> DenseCompressor::Create(const DenseParams& p) {
  if (p.elements < 0) return absl::InvalidArgumentError("none: elements < 0");
  if (p.use_cuda) {
#if defined(TESTBED_DENSE_HAS_CUDA)
    if (!CudaDeviceAvailable()) return absl::UnavailableError("none: device = \"cuda\" but no GPU is usable");
#else
    return absl::UnavailableError("none: device = \"cuda\" but this build has no CUDA kernels");
#endif
  }
  auto c = std::unique_ptr<DenseCompressor>(new DenseCompressor(p));
  if (p.elements > 0) {
    if (absl::Status s = c->Bind(p.elements); !s.ok()) return s;
  }
  return c;
}

absl::Status DenseCompressor::Bind(std::int64_t elements) {
  if (elements_ != 0) {
    if (elements != elements_) {
      return absl::InvalidArgumentError(absl::StrCat("none: gradient of ", elements, " values, but this compressor is for ",
                                                     elements_, " (one instance per gradient bucket)"));
    }
    return absl::OkStatus();
  }
  if (elements < 1) return absl::InvalidArgumentError("none: empty gradient");
  elements_ = elements;
  return absl::OkStatus();
}

absl::Status DenseCompressor::EncodeInto(std::span<const float> gradient, const EncodeContext& context, Payload& payload) {
  if (absl::Status s = Bind(static_cast<std::int64_t>(gradient.size())); !s.ok()) return s;
  payload.parts.resize(2);
  SetAgreementPart(Fields(elements_), payload.parts[0]);
  payload.parts[1].Reset(kValues, DataType::kFloat32, ReduceOp::kSum, elements_);
  std::span<float> values = payload.parts[1].view<float>();
  std::int64_t nonfinite = 0;
  if (params_.use_cuda) {
#if defined(TESTBED_DENSE_HAS_CUDA)
    const std::string err = CopyCheckedCuda(gradient.data(), elements_, values.data(), &nonfinite);
    if (!err.empty()) return absl::InternalError(absl::StrCat("none CUDA encode: ", err));
#endif
  } else {
    nonfinite = CopyChecked(gradient, values);
  }
  if (nonfinite > 0) {
    return absl::InvalidArgumentError(absl::StrCat("none: gradient of rank ", context.rank, " at step ", context.step,
                                                   " has ", nonfinite, " non-finite values (NaN or infinity)"));
  }
  return absl::OkStatus();
}

absl::Status DenseCompressor::Decode(std::span<const Payload> payloads, const DecodeOptions& options, std::span<float> out) {
  if (payloads.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("none: Decode takes the one combined payload, got ", payloads.size(),
                                                   " (all-reduce each part first)"));
  }
  if (options.ranks < 1) return absl::InvalidArgumentError("none: DecodeOptions.ranks < 1");
  if (absl::Status s = Bind(static_cast<std::int64_t>(out.size())); !s.ok()) return s;
  const Payload& p = payloads.front();
  if (absl::Status s = CheckAgreementPart(p, Fields(elements_)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("none: ", s.message()));
  }
  const PayloadPart* part = p.Find(kValues);
  if (part == nullptr || static_cast<std::int64_t>(part->view<float>().size()) != elements_) {
    return absl::InvalidArgumentError(absl::StrCat("none: payload lacks ", elements_, " float32 values"));
  }
  std::span<const float> summed = part->view<float>();
  const int divisor = options.average ? options.ranks : 1;
  if (params_.use_cuda) {
#if defined(TESTBED_DENSE_HAS_CUDA)
    const std::string err = DivideCuda(summed.data(), elements_, divisor, out.data());
    if (!err.empty()) return absl::InternalError(absl::StrCat("none CUDA decode: ", err));
#endif
  } else if (divisor == 1) {
    std::copy(summed.begin(), summed.end(), out.begin());
  } else {
    Divide(summed, divisor, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<CompressionCost> DenseCompressor::Cost(const CompressionQuery& q) const {
  if (absl::Status s = ValidateCompressionQuery(q); !s.ok()) return s;
  const double n = static_cast<double>(q.elements);
  CompressionCost c;
  c.transfers.push_back({kAgreementPartName, CollectiveOp::kAllReduce, 2 * 2 * 8});
  c.transfers.push_back({kValues, CollectiveOp::kAllReduce, 4 * q.elements});
  // A copy into the communication buffer and one out of it (with the division when averaging).
  c.encode.flops = n;
  c.encode.bytes = 8 * n;
  c.decode.flops = n;
  c.decode.bytes = 8 * n;
  return c;
}

}  // namespace testbed::dense
