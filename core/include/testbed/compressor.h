// Kind `compressor`: gradient compression for data-parallel training, one interface for both
// backends. Real ranks: each rank Encodes its gradient into a Payload, the payloads cross the
// data-parallel group (part by part with an all-reduce when the compressor is mergeable, whole
// payloads with an all-gather otherwise) and every rank Decodes the result into the dense summed
// or averaged gradient. Simulator: Cost() states the bytes on the wire, the collective that
// carries them, and the encode/decode work for DeviceModel::KernelTime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "testbed/communicator.h"
#include "testbed/component.h"
#include "testbed/reduce_elements.h"
#include "testbed/schedule.h"

namespace testbed {

// ---------------------------------------------------------------------------------------------
// Payloads

// One buffer of a payload: `elements` values of `type`, stored contiguously in host memory.
// `op` is how the ranks' copies combine when the compressor is mergeable (an all-reduce with
// that op); for all-gathered payloads it is not used. Storage is bytes from operator new, so
// it is aligned for every DataType and may be handed to a communicator as it is.
struct PayloadPart {
  std::string name;  // "bitmap", "sketch", ...: for error messages and traces
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::int64_t elements = 0;
  std::vector<std::byte> data;  // elements * DataTypeSize(type) bytes

  PayloadPart() = default;
  PayloadPart(std::string part_name, DataType part_type, ReduceOp part_op, std::int64_t count)
      : name(std::move(part_name)), type(part_type), op(part_op), elements(count),
        data(static_cast<std::size_t>(count) * DataTypeSize(part_type)) {}

  // Re-labels and resizes this part in place. The storage keeps its capacity, so a payload
  // reused across steps is not reallocated; contents are unspecified afterwards.
  void Reset(std::string_view part_name, DataType part_type, ReduceOp part_op, std::int64_t count) {
    if (name != part_name) name.assign(part_name.data(), part_name.size());
    type = part_type;
    op = part_op;
    elements = count;
    data.resize(static_cast<std::size_t>(count) * DataTypeSize(part_type));
  }

  [[nodiscard]] std::int64_t bytes() const noexcept { return static_cast<std::int64_t>(data.size()); }
  [[nodiscard]] void* raw() noexcept { return data.data(); }
  [[nodiscard]] const void* raw() const noexcept { return data.data(); }

  // Typed views. T must be the part's element type (DataTypeOf<T>() == type); a mismatch
  // gives an empty span, which the caller's size check then reports.
  template <typename T>
  [[nodiscard]] std::span<T> view() noexcept {
    if (DataTypeOf<std::remove_const_t<T>>() != type) return {};
    return {reinterpret_cast<T*>(data.data()), static_cast<std::size_t>(elements)};
  }
  template <typename T>
  [[nodiscard]] std::span<const T> view() const noexcept {
    if (DataTypeOf<std::remove_const_t<T>>() != type) return {};
    return {reinterpret_cast<const T*>(data.data()), static_cast<std::size_t>(elements)};
  }
};

// What one rank sends: an ordered list of parts. Every rank of a group produces the same list
// of parts (same names, types, ops, and for mergeable compressors the same sizes).
struct Payload {
  std::vector<PayloadPart> parts;

  [[nodiscard]] std::int64_t bytes() const noexcept {
    std::int64_t total = 0;
    for (const PayloadPart& p : parts) total += p.bytes();
    return total;
  }
  [[nodiscard]] const PayloadPart* Find(std::string_view part_name) const noexcept {
    for (const PayloadPart& p : parts) {
      if (p.name == part_name) return &p;
    }
    return nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// The interface

// Who is encoding: stochastic compressors seed their randomness from (seed, rank, step), so a
// run is reproducible and ranks do not round coherently.
struct EncodeContext {
  int rank = 0;            // rank in the data-parallel group
  std::int64_t step = 0;   // training step (any counter that differs between calls)
};

struct DecodeOptions {
  int ranks = 1;         // size of the data-parallel group whose payloads were combined
  bool average = false;  // divide the sum by `ranks`
};

// Simulator query: one gradient (or gradient bucket) of `elements` float32 values.
struct CompressionQuery {
  std::int64_t elements = 0;
  double density = 1.0;  // fraction of non-zero values in each rank's gradient, in (0, 1]
  int ranks = 1;         // data-parallel group size
};

// One collective of the exchange.
struct WireTransfer {
  std::string part;             // payload part(s) it carries
  CollectiveOp op = CollectiveOp::kAllReduce;  // kAllReduce (mergeable) or kAllGather
  std::int64_t bytes_per_rank = 0;             // what each rank contributes

  // `bytes` as Collective::PlanCollective takes it: the buffer each member holds for an
  // all-reduce, the gathered output for an all-gather.
  [[nodiscard]] std::int64_t CollectiveBytes(int ranks) const noexcept {
    return op == CollectiveOp::kAllGather ? bytes_per_rank * ranks : bytes_per_rank;
  }
};

// Work of one kernel (or a sequence of kernels) on one rank, float32 arithmetic: the simulator
// prices it with DeviceModel::KernelTime(flops, bytes, Precision::kFp32, device).
struct KernelCost {
  double flops = 0;
  double bytes = 0;  // bytes moved through device memory
};

struct CompressionCost {
  std::vector<WireTransfer> transfers;  // in the order the executor runs them
  KernelCost encode;                    // per rank, before the exchange
  KernelCost decode;                    // per rank, after it (all-gather: all ranks' payloads)

  [[nodiscard]] std::int64_t WireBytesPerRank() const noexcept {
    std::int64_t total = 0;
    for (const WireTransfer& t : transfers) total += t.bytes_per_rank;
    return total;
  }
};

// One instance per rank and per gradient (or gradient bucket): state kept across steps, such as
// error-feedback residuals, lives in the instance. The gradient length is fixed by the first
// Encode (or by the component's parameters); any other length afterwards is an error.
// No method throws; errors are values.
class Compressor : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kCompressor;

  // True: payloads combine part by part with an all-reduce using each part's ReduceOp (sum for
  // sketch counters and dense values, bitwise OR for bitmaps and agreement checks), and Decode
  // takes the one combined payload. False: payloads travel whole by all-gather (sizes may
  // differ between ranks: use an all-gather-v), and Decode takes every rank's payload.
  [[nodiscard]] virtual bool mergeable() const noexcept = 0;

  // Encodes this rank's gradient (float32, host memory) into `payload`, replacing its parts.
  // Buffers of a payload passed in again are reused (keep one Payload per rank and bucket
  // across steps: no allocation on the hot path). On error the payload's contents are
  // unspecified. Errors: InvalidArgument for an empty gradient, a length other than the one
  // this instance was made for, or a non-finite value (a NaN would silently poison every
  // rank's result).
  [[nodiscard]] virtual absl::Status EncodeInto(std::span<const float> gradient, const EncodeContext& context,
                                                Payload& payload) = 0;

  // EncodeInto a fresh payload.
  [[nodiscard]] absl::StatusOr<Payload> Encode(std::span<const float> gradient, const EncodeContext& context) {
    Payload payload;
    if (absl::Status s = EncodeInto(gradient, context, payload); !s.ok()) return s;
    return payload;
  }

  // Decodes into `out` (length = the gradient length) the sum over ranks of their gradients as
  // the compressor reconstructs them, divided by options.ranks when options.average.
  // `payloads`: mergeable: exactly one, the combined payload (see CombinePayloads); otherwise
  // one per rank, in rank order (options.ranks of them).
  // Errors: InvalidArgument for a wrong payload count, a malformed payload (missing part, wrong
  // size or type, an index out of range) or a wrong `out` length; FailedPrecondition when the
  // payloads come from ranks that disagree on the configuration (seed, shape, gradient length)
  // or from another compressor.
  [[nodiscard]] virtual absl::Status Decode(std::span<const Payload> payloads, const DecodeOptions& options,
                                            std::span<float> out) = 0;

  // The cost of one exchange for the simulator. Estimates where the real size depends on the
  // data (the number of non-zeros after a merge, say) state their assumption in the
  // implementation's documentation. Errors: InvalidArgument for elements < 1, ranks < 1, or a
  // density outside (0, 1].
  [[nodiscard]] virtual absl::StatusOr<CompressionCost> Cost(const CompressionQuery& query) const = 0;
};

// ---------------------------------------------------------------------------------------------
// Helpers shared by every compressor and by the code that moves payloads.

// What an all-reduce of every part with its own ReduceOp produces from `payloads` (rank order;
// float sums are taken in rank order). The reference every communicator path must match.
// Errors: InvalidArgument for no payloads or payloads whose part lists differ (name, type, op,
// size), or an op that is not defined on the part's type.
[[nodiscard]] inline absl::StatusOr<Payload> CombinePayloads(std::span<const Payload> payloads) {
  if (payloads.empty()) return absl::InvalidArgumentError("CombinePayloads: no payloads");
  Payload out = payloads.front();
  for (std::size_t r = 1; r < payloads.size(); ++r) {
    const Payload& p = payloads[r];
    if (p.parts.size() != out.parts.size()) {
      return absl::InvalidArgumentError(absl::StrCat("CombinePayloads: rank ", r, " has ", p.parts.size(),
                                                     " parts, rank 0 has ", out.parts.size()));
    }
    for (std::size_t i = 0; i < p.parts.size(); ++i) {
      PayloadPart& acc = out.parts[i];
      const PayloadPart& in = p.parts[i];
      if (in.name != acc.name || in.type != acc.type || in.op != acc.op || in.elements != acc.elements ||
          in.data.size() != acc.data.size()) {
        return absl::InvalidArgumentError(absl::StrCat("CombinePayloads: part ", i, " ('", acc.name,
                                                       "') differs between rank 0 and rank ", r,
                                                       " in name, type, op or size"));
      }
      if (!comm_checks::Reduction(acc.type, acc.op, "").ok()) {
        return absl::InvalidArgumentError(absl::StrCat("CombinePayloads: ", ReduceOpName(acc.op),
                                                       " is not defined on ", DataTypeName(acc.type), " part '",
                                                       acc.name, "'"));
      }
      ReduceElements(acc.data.data(), in.data.data(), acc.elements, acc.type, acc.op);
    }
  }
  return out;
}

// Agreement check. A part of 2 x fields uint64 words, each field written as its value followed
// by its complement, combined with bitwise OR. If every rank wrote the same fields, value and
// complement stay disjoint after the OR; a rank with another seed or shape sets a bit in both.
// Compressors put one such part first in their payloads, with a format tag as field 0.
struct AgreementField {
  const char* name;     // "seed", "columns", ...
  std::uint64_t value;  // this rank's value
};

inline constexpr char kAgreementPartName[] = "agreement";

// Writes the agreement part into `part` (reusing its storage).
inline void SetAgreementPart(std::span<const AgreementField> fields, PayloadPart& part) {
  part.Reset(kAgreementPartName, DataType::kUInt64, ReduceOp::kBitOr, 2 * static_cast<std::int64_t>(fields.size()));
  std::span<std::uint64_t> w = part.view<std::uint64_t>();
  std::size_t i = 0;
  for (const AgreementField& f : fields) {
    w[2 * i] = f.value;
    w[2 * i + 1] = ~f.value;
    ++i;
  }
}

[[nodiscard]] inline PayloadPart MakeAgreementPart(std::span<const AgreementField> fields) {
  PayloadPart part;
  SetAgreementPart(fields, part);
  return part;
}

// Checks a (combined or single) agreement part against this decoder's own fields. Errors:
// InvalidArgument when the part is missing or malformed; FailedPrecondition naming the first
// field on which ranks disagree, or on which the payload differs from this decoder.
[[nodiscard]] inline absl::Status CheckAgreementPart(const Payload& payload,
                                                     std::span<const AgreementField> expected) {
  const PayloadPart* part = payload.Find(kAgreementPartName);
  if (part == nullptr) return absl::InvalidArgumentError("payload has no agreement part");
  std::span<const std::uint64_t> w = part->view<std::uint64_t>();
  if (w.size() != 2 * expected.size()) {
    return absl::InvalidArgumentError(absl::StrCat("agreement part has ", part->elements, " words, expected ",
                                                   2 * expected.size(), " (payload of another compressor?)"));
  }
  std::size_t i = 0;
  for (const AgreementField& f : expected) {
    const std::uint64_t value = w[2 * i];
    const std::uint64_t complement = w[2 * i + 1];
    if ((value & complement) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("payloads come from ranks that disagree on '", f.name,
                                                        "': every rank needs the same configuration"));
    }
    if (value != f.value || complement != ~f.value) {
      return absl::FailedPreconditionError(absl::StrCat("payload has '", f.name, "' = ", value,
                                                        ", this decoder has ", f.value));
    }
    ++i;
  }
  return absl::OkStatus();
}

// A stable 64-bit tag for a payload format ("s2reducer/1"): FNV-1a, so that a payload of
// one compressor fed to another fails the agreement check instead of decoding garbage.
[[nodiscard]] constexpr std::uint64_t PayloadFormatTag(std::string_view format) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : format) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Validation shared by Cost implementations.
[[nodiscard]] inline absl::Status ValidateCompressionQuery(const CompressionQuery& q) {
  if (q.elements < 1) return absl::InvalidArgumentError(absl::StrCat("cost query: elements ", q.elements, " < 1"));
  if (q.ranks < 1) return absl::InvalidArgumentError(absl::StrCat("cost query: ranks ", q.ranks, " < 1"));
  if (!(q.density > 0.0 && q.density <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("cost query: density ", q.density, " outside (0, 1]"));
  }
  return absl::OkStatus();
}

}  // namespace testbed
