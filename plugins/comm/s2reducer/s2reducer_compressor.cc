#include "s2reducer_compressor.h"

#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "sketch_codec.h"
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
#include "s2reducer_cuda.h"
#endif

namespace testbed::s2reducer {
namespace {

constexpr std::uint64_t kFormat = PayloadFormatTag("s2reducer/1");
constexpr char kBitmap[] = "bitmap";
constexpr char kSketch[] = "sketch";

// What every rank must agree on; travels in the payload's agreement part.
std::array<AgreementField, 5> Fields(const SketchShape& s) {
  return {{{"format", kFormat},
           {"elements", static_cast<std::uint64_t>(s.elements)},
           {"rows", static_cast<std::uint64_t>(s.rows)},
           {"columns", static_cast<std::uint64_t>(s.columns)},
           {"seed", s.seed}}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<S2ReducerCompressor>> S2ReducerCompressor::Create(const S2ReducerParams& p) {
  if (p.rows < 1 || p.rows > kMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: rows = ", p.rows, ", expected 1..", kMaxRows));
  }
  if (p.columns < 0 || p.columns > 0xffffffffll) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: columns = ", p.columns, ", expected 0..2^32-1"));
  }
  if (!(p.ratio >= 1.0) || !std::isfinite(p.ratio)) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: ratio = ", p.ratio, ", expected >= 1"));
  }
  if (p.elements < 0) return absl::InvalidArgumentError("s2reducer: elements < 0");
  if (p.use_cuda) {
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
    if (!CudaDeviceAvailable()) return absl::UnavailableError("s2reducer: device = \"cuda\" but no GPU is usable");
#else
    return absl::UnavailableError("s2reducer: device = \"cuda\" but this build has no CUDA kernels");
#endif
  }
  auto c = std::unique_ptr<S2ReducerCompressor>(new S2ReducerCompressor(p));
  if (p.elements > 0) {
    if (absl::Status s = c->Bind(p.elements); !s.ok()) return s;
  }
  return c;
}

SketchShape S2ReducerCompressor::ShapeFor(std::int64_t elements) const noexcept {
  SketchShape s;
  s.elements = elements;
  s.rows = params_.rows;
  s.seed = params_.seed;
  if (params_.columns > 0) {
    s.columns = params_.columns;
  } else {
    const double per_row = std::ceil(static_cast<double>(elements) / (params_.ratio * params_.rows));
    s.columns = std::max<std::int64_t>(1, static_cast<std::int64_t>(per_row));
  }
  return s;
}

absl::Status S2ReducerCompressor::Bind(std::int64_t elements) {
  if (shape_.has_value()) {
    if (elements != shape_->elements) {
      return absl::InvalidArgumentError(absl::StrCat("s2reducer: gradient of ", elements,
                                                     " values, but this sketch is for ", shape_->elements,
                                                     " (one compressor instance per gradient bucket)"));
    }
    return absl::OkStatus();
  }
  if (elements < 1) return absl::InvalidArgumentError("s2reducer: empty gradient");
  const SketchShape s = ShapeFor(elements);
  if (s.columns > 0xffffffffll) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: ", s.columns, " columns per row exceed 2^32-1"));
  }
  shape_ = s;
  return absl::OkStatus();
}

absl::Status S2ReducerCompressor::EncodeInto(std::span<const float> gradient, const EncodeContext& context,
                                             Payload& payload) {
  if (absl::Status s = Bind(static_cast<std::int64_t>(gradient.size())); !s.ok()) return s;
  const SketchShape& shape = *shape_;
  payload.parts.resize(3);
  SetAgreementPart(Fields(shape), payload.parts[0]);
  payload.parts[1].Reset(kBitmap, DataType::kUInt64, ReduceOp::kBitOr, shape.bitmap_words());
  payload.parts[2].Reset(kSketch, DataType::kFloat32, ReduceOp::kSum, shape.counters());
  std::span<std::uint64_t> bitmap = payload.parts[1].view<std::uint64_t>();
  std::span<float> sketch = payload.parts[2].view<float>();
  EncodeStats stats;
  if (params_.use_cuda) {
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
    const std::string err =
        EncodeSketchCuda(shape, gradient.data(), bitmap.data(), sketch.data(), &stats.nonzeros, &stats.nonfinite);
    if (!err.empty()) return absl::InternalError(absl::StrCat("s2reducer CUDA encode: ", err));
#endif
  } else {
    stats = EncodeSketch(shape, gradient, bitmap, sketch);
  }
  if (stats.nonfinite > 0) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: gradient of rank ", context.rank, " at step ",
                                                   context.step, " has ", stats.nonfinite,
                                                   " non-finite values (NaN or infinity)"));
  }
  return absl::OkStatus();
}

absl::Status S2ReducerCompressor::Decode(std::span<const Payload> payloads, const DecodeOptions& options,
                                         std::span<float> out) {
  if (payloads.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: Decode takes the one combined payload, got ",
                                                   payloads.size(), " (all-reduce each part first)"));
  }
  if (options.ranks < 1) return absl::InvalidArgumentError("s2reducer: DecodeOptions.ranks < 1");
  if (absl::Status s = Bind(static_cast<std::int64_t>(out.size())); !s.ok()) return s;
  const SketchShape& shape = *shape_;
  const Payload& p = payloads.front();
  if (absl::Status s = CheckAgreementPart(p, Fields(shape)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("s2reducer: ", s.message()));
  }
  const PayloadPart* bitmap_part = p.Find(kBitmap);
  const PayloadPart* sketch_part = p.Find(kSketch);
  if (bitmap_part == nullptr || sketch_part == nullptr) {
    return absl::InvalidArgumentError("s2reducer: payload lacks its bitmap or sketch part");
  }
  std::span<const std::uint64_t> bitmap = bitmap_part->view<std::uint64_t>();
  std::span<const float> sketch = sketch_part->view<float>();
  if (static_cast<std::int64_t>(bitmap.size()) != shape.bitmap_words() ||
      static_cast<std::int64_t>(sketch.size()) != shape.counters()) {
    return absl::InvalidArgumentError(absl::StrCat("s2reducer: payload has ", bitmap_part->elements, " ",
                                                   DataTypeName(bitmap_part->type), " bitmap words and ",
                                                   sketch_part->elements, " ", DataTypeName(sketch_part->type),
                                                   " counters; expected ", shape.bitmap_words(), " uint64 and ",
                                                   shape.counters(), " float32"));
  }
  const int tail = static_cast<int>(shape.elements % 64);
  if (tail != 0 && (bitmap.back() >> tail) != 0) {
    return absl::InvalidArgumentError("s2reducer: bitmap marks positions past the end of the gradient");
  }
  const int divisor = options.average ? options.ranks : 1;
  if (params_.use_cuda) {
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
    const std::string err = DecodeSketchCuda(shape, bitmap.data(), sketch.data(), divisor, out.data());
    if (!err.empty()) return absl::InternalError(absl::StrCat("s2reducer CUDA decode: ", err));
#endif
  } else {
    DecodeSketch(shape, bitmap, sketch, divisor, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<CompressionCost> S2ReducerCompressor::Cost(const CompressionQuery& q) const {
  if (absl::Status s = ValidateCompressionQuery(q); !s.ok()) return s;
  const SketchShape shape = shape_.has_value() && shape_->elements == q.elements ? *shape_ : ShapeFor(q.elements);
  const double n = static_cast<double>(q.elements);
  const double rows = shape.rows;
  const double words = static_cast<double>(shape.bitmap_words());
  const double counters = static_cast<double>(shape.counters());
  const double nonzeros = n * q.density;
  const double merged = n * (1.0 - std::pow(1.0 - q.density, q.ranks));
  // A row's hash is about a dozen integer operations; counted as FLOPs, as GPUs issue them at
  // a similar rate.
  constexpr double kHashOps = 12;
  CompressionCost c;
  c.transfers.push_back({kAgreementPartName, CollectiveOp::kAllReduce, 2 * 5 * 8});
  c.transfers.push_back({kBitmap, CollectiveOp::kAllReduce, static_cast<std::int64_t>(words) * 8});
  c.transfers.push_back({kSketch, CollectiveOp::kAllReduce, static_cast<std::int64_t>(counters) * 4});
  // Encode: read the gradient, write the bitmap, clear the sketch, one read-modify-write of a
  // counter per (non-zero, row).
  c.encode.flops = n + nonzeros * rows * (kHashOps + 2);
  c.encode.bytes = 4 * n + 8 * words + 4 * counters + nonzeros * rows * 8;
  // Decode: read the bitmap, write the dense output, gather one counter per (position, row),
  // sort the rows' estimates.
  c.decode.flops = merged * rows * (kHashOps + 1 + rows);
  c.decode.bytes = 8 * words + 4 * n + merged * rows * 4;
  return c;
}

}  // namespace testbed::s2reducer
