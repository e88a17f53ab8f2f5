// Chakra trace files: the varint framing, the conversion between the schema's messages
// (et_def.proto, the only place its generated code is seen) and the plain structs of
// et_trace.h, the files of a trace set and the communicator group JSON.
#include "chakra/et_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "chakra/et_def.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/unknown_field_set.h"

namespace testbed::chakra {

namespace {

namespace pb = ::ChakraProtoMsg;
using Case = pb::AttributeProto::ValueCase;

// No real message comes near this; a larger length prefix means the bytes are not a trace.
constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 30;
constexpr int kMaxLengthPrefixBytes = 5;  // a varint of 32 bits
constexpr absl::string_view kHdf5Signature("\x89HDF\r\n\x1a\n", 8);
constexpr int kStorageField = 11;  // Node.storage of the newest schema, not modelled

// ---- Errors: each names the file and the byte offset.

absl::Status Truncated(const std::string& file, std::uint64_t at, absl::string_view detail) {
  return absl::DataLossError(absl::StrCat(file, ": truncated at byte ", at, " (", detail, ")"));
}

absl::Status NotATrace(const std::string& file, absl::string_view what, std::uint64_t at) {
  return absl::DataLossError(absl::StrCat(file, ": not a Chakra trace: ", what, " at byte ", at));
}

// ---- The wire format, for framing and for saying where bytes stop being the schema's.

enum class VarintRead { kOk, kCut, kTooLong };

// Reads a base-128 varint of at most `max_bytes` bytes from bytes[i, end), advancing i.
VarintRead ReadVarint(absl::string_view bytes, std::size_t& i, std::size_t end, int max_bytes,
                      std::uint64_t& value) noexcept {
  value = 0;
  for (int k = 0; k < max_bytes; ++k) {
    if (i >= end) return VarintRead::kCut;
    const auto b = static_cast<std::uint8_t>(bytes[i++]);
    value |= static_cast<std::uint64_t>(b & 0x7F) << (7 * k);
    if ((b & 0x80) == 0) return VarintRead::kOk;
  }
  return VarintRead::kTooLong;
}

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Whether the schema can have field `field` with wire type `wire` at the top of a message.
using FieldCheck = bool (*)(std::uint64_t field, std::uint64_t wire);

bool MetadataField(std::uint64_t field, std::uint64_t wire) {
  return (field == 1 || field == 2) && wire == kLengthDelimited;
}

bool NodeField(std::uint64_t field, std::uint64_t wire) {
  switch (field) {
    case 1: case 3: case 6: case 7:
      return wire == kVarint;
    case 2: case 8: case 9: case 10:
      return wire == kLengthDelimited;
    case 4: case 5:  // repeated uint64, packed or not
      return wire == kVarint || wire == kLengthDelimited;
    default:  // a field of a later schema: any wire type proto3 has
      return wire == kVarint || wire == kFixed64 || wire == kLengthDelimited || wire == kFixed32;
  }
}

struct Fault {
  std::size_t at;
  std::string what;
};

// The first place in bytes[begin, end) where the top-level fields stop being ones `check`
// accepts; nullopt when every field is well formed up to `end` (bytes cut short there, or a
// fault inside a nested message, which this does not look into).
std::optional<Fault> FindFault(absl::string_view bytes, std::size_t begin, std::size_t end, FieldCheck check) {
  std::size_t i = begin;
  while (i < end) {
    const std::size_t at = i;
    std::uint64_t tag = 0;
    switch (ReadVarint(bytes, i, end, 10, tag)) {
      case VarintRead::kCut: return std::nullopt;
      case VarintRead::kTooLong: return Fault{at, "a field tag longer than 10 bytes"};
      case VarintRead::kOk: break;
    }
    const std::uint64_t field = tag >> 3, wire = tag & 7;
    if (field == 0 || !check(field, wire)) {
      return Fault{at, absl::StrCat("field ", field, " with wire type ", wire)};
    }
    std::uint64_t skip = 0;
    if (wire == kFixed64) skip = 8;
    if (wire == kFixed32) skip = 4;
    if (wire == kVarint || wire == kLengthDelimited) {
      std::uint64_t v = 0;
      switch (ReadVarint(bytes, i, end, 10, v)) {
        case VarintRead::kCut: return std::nullopt;
        case VarintRead::kTooLong:
          return Fault{at, absl::StrCat("field ", field, " with a varint longer than 10 bytes")};
        case VarintRead::kOk: break;
      }
      if (wire == kLengthDelimited) skip = v;
    }
    if (skip > end - i) return std::nullopt;
    i += static_cast<std::size_t>(skip);
  }
  return std::nullopt;
}

// One message's place: its length prefix at `offset`, its bytes [begin, begin + size).
struct Frame {
  std::size_t offset = 0;
  std::size_t begin = 0;
  std::uint64_t size = 0;
};

// Reads the length prefix at `offset` (`what`: "the metadata" or "a node", for errors). The
// frame's bytes may run past the end; the caller decides what that means.
absl::StatusOr<Frame> ReadFrame(absl::string_view bytes, std::size_t offset, const std::string& file,
                                absl::string_view what) {
  Frame f{offset, offset, 0};
  switch (ReadVarint(bytes, f.begin, bytes.size(), kMaxLengthPrefixBytes, f.size)) {
    case VarintRead::kCut:
      return Truncated(file, offset, absl::StrCat("the length prefix of ", what, " is cut short"));
    case VarintRead::kTooLong:
      return NotATrace(file, absl::StrCat("a length prefix longer than ", kMaxLengthPrefixBytes, " bytes"), offset);
    case VarintRead::kOk: break;
  }
  if (f.size > kMaxMessageBytes) {
    return NotATrace(file, absl::StrCat("a length prefix of ", f.size, " bytes (above 1 GiB)"), offset);
  }
  return f;
}

std::size_t Remaining(absl::string_view bytes, const Frame& f) noexcept { return bytes.size() - f.begin; }

// The error for a message that did not parse: the first field that is not the schema's, or
// the message itself when the fault is deeper.
absl::Status ParseFailure(absl::string_view bytes, const Frame& f, const std::string& file, absl::string_view what,
                          FieldCheck check) {
  if (auto fault = FindFault(bytes, f.begin, f.begin + static_cast<std::size_t>(f.size), check)) {
    return NotATrace(file, absl::StrCat(fault->what, " in ", what), fault->at);
  }
  return NotATrace(file, absl::StrCat(what, " that does not parse"), f.offset);
}

// ---- Attribute values: the schema's oneof into Attr::Value's alternatives, and back.

// Where an attribute was read, for its errors: a node (by id) or the metadata, and the offset
// of its message's length prefix.
struct Owner {
  const std::string& file;
  std::optional<std::uint64_t> node;
  std::size_t offset;
};

absl::Status AboveInt64(const Owner& o, const std::string& attr, std::uint64_t value) {
  return absl::OutOfRangeError(absl::StrCat(o.file, ": ", o.node ? absl::StrCat("node ", *o.node) : "the metadata",
                                            " at byte ", o.offset, ": attribute \"", attr, "\" holds ", value,
                                            ", above the int64 range"));
}

template <typename T, typename Values>
std::vector<T> ListOf(const Values& values) {
  return std::vector<T>(values.begin(), values.end());
}

// An unsigned 64-bit list, each value checked against the int64 range.
template <typename Values>
absl::StatusOr<std::vector<std::int64_t>> SignedList(const Values& values, const Owner& o, const std::string& attr) {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(values.size()));
  for (const std::uint64_t v : values) {
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return AboveInt64(o, attr, v);
    out.push_back(static_cast<std::int64_t>(v));
  }
  return out;
}

absl::StatusOr<Attr::Value> ValueOf(const pb::AttributeProto& p, const Owner& o) {
  using I = std::int64_t;
  switch (p.value_case()) {
    case Case::kDoubleVal: return p.double_val();
    case Case::kFloatVal: return static_cast<double>(p.float_val());
    case Case::kInt32Val: return I{p.int32_val()};
    case Case::kInt64Val: return I{p.int64_val()};
    case Case::kUint32Val: return I{p.uint32_val()};
    case Case::kSint32Val: return I{p.sint32_val()};
    case Case::kSint64Val: return I{p.sint64_val()};
    case Case::kFixed32Val: return I{p.fixed32_val()};
    case Case::kSfixed32Val: return I{p.sfixed32_val()};
    case Case::kSfixed64Val: return I{p.sfixed64_val()};
    case Case::kUint64Val:
    case Case::kFixed64Val: {
      const std::uint64_t v = p.value_case() == Case::kUint64Val ? p.uint64_val() : p.fixed64_val();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<I>::max())) return AboveInt64(o, p.name(), v);
      return static_cast<I>(v);
    }
    case Case::kBoolVal: return p.bool_val();
    case Case::kStringVal: return p.string_val();
    case Case::kBytesVal: return p.bytes_val();
    case Case::kDoubleList: return ListOf<double>(p.double_list().values());
    case Case::kFloatList: return ListOf<double>(p.float_list().values());
    case Case::kInt32List: return ListOf<I>(p.int32_list().values());
    case Case::kInt64List: return ListOf<I>(p.int64_list().values());
    case Case::kUint32List: return ListOf<I>(p.uint32_list().values());
    case Case::kSint32List: return ListOf<I>(p.sint32_list().values());
    case Case::kSint64List: return ListOf<I>(p.sint64_list().values());
    case Case::kFixed32List: return ListOf<I>(p.fixed32_list().values());
    case Case::kSfixed32List: return ListOf<I>(p.sfixed32_list().values());
    case Case::kSfixed64List: return ListOf<I>(p.sfixed64_list().values());
    case Case::kUint64List: {
      auto list = SignedList(p.uint64_list().values(), o, p.name());
      if (!list.ok()) return list.status();
      return *std::move(list);
    }
    case Case::kFixed64List: {
      auto list = SignedList(p.fixed64_list().values(), o, p.name());
      if (!list.ok()) return list.status();
      return *std::move(list);
    }
    case Case::kBoolList: return ListOf<bool>(p.bool_list().values());
    case Case::kStringList: return ListOf<std::string>(p.string_list().values());
    case Case::kBytesList: return ListOf<std::string>(p.bytes_list().values());
    case Case::VALUE_NOT_SET: break;
  }
  return std::monostate{};
}

absl::StatusOr<std::vector<Attr>> AttrsOf(const google::protobuf::RepeatedPtrField<pb::AttributeProto>& attrs,
                                          const Owner& o) {
  std::vector<Attr> out;
  out.reserve(static_cast<std::size_t>(attrs.size()));
  for (const pb::AttributeProto& p : attrs) {
    auto value = ValueOf(p, o);
    if (!value.ok()) return value.status();
    out.push_back(Attr{p.name(), *std::move(value), static_cast<int>(p.value_case())});
  }
  return out;
}

// The integer ranges of the schema's integer fields, by the field number of the scalar.
enum class IntRange { kNone, kInt32, kUint32, kNonNegative, kInt64 };

IntRange RangeOf(int scalar_wire) noexcept {
  switch (scalar_wire) {
    case Case::kInt32Val: case Case::kSint32Val: case Case::kSfixed32Val: return IntRange::kInt32;
    case Case::kUint32Val: case Case::kFixed32Val: return IntRange::kUint32;
    case Case::kUint64Val: case Case::kFixed64Val: return IntRange::kNonNegative;
    case Case::kInt64Val: case Case::kSint64Val: case Case::kSfixed64Val: return IntRange::kInt64;
    default: return IntRange::kNone;
  }
}

bool Fits(IntRange r, std::int64_t v) noexcept {
  switch (r) {
    case IntRange::kInt32:
      return v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max();
    case IntRange::kUint32: return v >= 0 && v <= std::numeric_limits<std::uint32_t>::max();
    case IntRange::kNonNegative: return v >= 0;
    case IntRange::kInt64: return true;
    case IntRange::kNone: return false;
  }
  return false;
}

bool FitsFloat(double v) noexcept { return std::isnan(v) || static_cast<double>(static_cast<float>(v)) == v; }

// Strict UTF-8 (no overlong forms, surrogates or values above U+10FFFF): what a proto3
// string field must hold for a reader to accept it; other bytes go to the bytes fields.
bool IsUtf8(absl::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (s.size() - i <= static_cast<std::size_t>(extra)) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

template <typename T, typename Field>
void Fill(Field* field, const std::vector<std::int64_t>& values) {
  field->Reserve(static_cast<int>(values.size()));
  for (const std::int64_t v : values) field->Add(static_cast<T>(v));
}

void SetInt(pb::AttributeProto& p, int wire, std::int64_t v) {
  if (!Fits(RangeOf(wire), v)) wire = Case::kInt64Val;
  switch (wire) {
    case Case::kInt32Val: p.set_int32_val(static_cast<std::int32_t>(v)); break;
    case Case::kSint32Val: p.set_sint32_val(static_cast<std::int32_t>(v)); break;
    case Case::kSfixed32Val: p.set_sfixed32_val(static_cast<std::int32_t>(v)); break;
    case Case::kUint32Val: p.set_uint32_val(static_cast<std::uint32_t>(v)); break;
    case Case::kFixed32Val: p.set_fixed32_val(static_cast<std::uint32_t>(v)); break;
    case Case::kUint64Val: p.set_uint64_val(static_cast<std::uint64_t>(v)); break;
    case Case::kFixed64Val: p.set_fixed64_val(static_cast<std::uint64_t>(v)); break;
    case Case::kSint64Val: p.set_sint64_val(v); break;
    case Case::kSfixed64Val: p.set_sfixed64_val(v); break;
    default: p.set_int64_val(v); break;
  }
}

void SetIntList(pb::AttributeProto& p, int wire, const std::vector<std::int64_t>& v) {
  // A list's field number is its scalar's plus one.
  const IntRange range = RangeOf(wire - 1);
  for (const std::int64_t x : v) {
    if (!Fits(range, x)) wire = Case::kInt64List;
  }
  switch (wire) {
    case Case::kInt32List: Fill<std::int32_t>(p.mutable_int32_list()->mutable_values(), v); break;
    case Case::kSint32List: Fill<std::int32_t>(p.mutable_sint32_list()->mutable_values(), v); break;
    case Case::kSfixed32List: Fill<std::int32_t>(p.mutable_sfixed32_list()->mutable_values(), v); break;
    case Case::kUint32List: Fill<std::uint32_t>(p.mutable_uint32_list()->mutable_values(), v); break;
    case Case::kFixed32List: Fill<std::uint32_t>(p.mutable_fixed32_list()->mutable_values(), v); break;
    case Case::kUint64List: Fill<std::uint64_t>(p.mutable_uint64_list()->mutable_values(), v); break;
    case Case::kFixed64List: Fill<std::uint64_t>(p.mutable_fixed64_list()->mutable_values(), v); break;
    case Case::kSint64List: Fill<std::int64_t>(p.mutable_sint64_list()->mutable_values(), v); break;
    case Case::kSfixed64List: Fill<std::int64_t>(p.mutable_sfixed64_list()->mutable_values(), v); break;
    default: Fill<std::int64_t>(p.mutable_int64_list()->mutable_values(), v); break;
  }
}

void SetDoubleList(pb::AttributeProto& p, int wire, const std::vector<double>& v) {
  bool as_float = wire == Case::kFloatList;
  for (const double x : v) as_float = as_float && FitsFloat(x);
  if (as_float) {
    auto* values = p.mutable_float_list()->mutable_values();
    values->Reserve(static_cast<int>(v.size()));
    for (const double x : v) values->Add(static_cast<float>(x));
  } else {
    p.mutable_double_list()->mutable_values()->Add(v.begin(), v.end());
  }
}

void SetStringList(pb::AttributeProto& p, int wire, const std::vector<std::string>& v) {
  bool as_bytes = wire == Case::kBytesList;
  for (const std::string& s : v) as_bytes = as_bytes || !IsUtf8(s);
  auto* values = as_bytes ? p.mutable_bytes_list()->mutable_values() : p.mutable_string_list()->mutable_values();
  values->Reserve(static_cast<int>(v.size()));
  for (const std::string& s : v) values->Add(std::string(s));
}

// `wire` is honoured where the value converts to that field exactly; otherwise (a value
// changed in code after it was read, or no wire) the field follows the C++ type.
void ToProto(const Attr& a, pb::AttributeProto& p) {
  p.set_name(a.name);
  const int wire = a.wire;
  struct Visitor {
    pb::AttributeProto& p;
    int wire;
    void operator()(std::monostate) const {}
    void operator()(std::int64_t v) const { SetInt(p, wire, v); }
    void operator()(double v) const {
      if (wire == Case::kFloatVal && FitsFloat(v)) {
        p.set_float_val(static_cast<float>(v));
      } else {
        p.set_double_val(v);
      }
    }
    void operator()(bool v) const { p.set_bool_val(v); }
    void operator()(const std::string& v) const {
      if (wire == Case::kBytesVal || !IsUtf8(v)) {
        p.set_bytes_val(v);
      } else {
        p.set_string_val(v);
      }
    }
    void operator()(const std::vector<std::int64_t>& v) const { SetIntList(p, wire, v); }
    void operator()(const std::vector<double>& v) const { SetDoubleList(p, wire, v); }
    void operator()(const std::vector<bool>& v) const {
      auto* values = p.mutable_bool_list()->mutable_values();
      values->Reserve(static_cast<int>(v.size()));
      for (const bool b : v) values->Add(b);
    }
    void operator()(const std::vector<std::string>& v) const { SetStringList(p, wire, v); }
  };
  std::visit(Visitor{p, wire}, a.value);
}

// ---- Nodes and the metadata.

void ToProto(const Node& n, pb::Node& p) {
  p.Clear();
  p.set_id(n.id);
  p.set_name(n.name);
  p.set_type(static_cast<pb::NodeType>(n.type));  // proto3 enums are open: unknown values pass
  p.mutable_ctrl_deps()->Add(n.ctrl_deps.begin(), n.ctrl_deps.end());
  p.mutable_data_deps()->Add(n.data_deps.begin(), n.data_deps.end());
  p.set_start_time_micros(n.start_time_micros);
  p.set_duration_micros(n.duration_micros);
  for (const Attr& a : n.attrs) ToProto(a, *p.add_attr());
}

// The schema fields of `p` that Node does not hold: inputs and outputs when they say
// something, storage (field 11, of the newest schema), and "field N" for later ones.
std::vector<std::string> Unmodelled(const pb::Node& p) {
  std::vector<std::string> out;
  if (p.has_inputs() && p.inputs().ByteSizeLong() > 0) out.emplace_back("inputs");
  if (p.has_outputs() && p.outputs().ByteSizeLong() > 0) out.emplace_back("outputs");
  const google::protobuf::UnknownFieldSet& unknown = p.GetReflection()->GetUnknownFields(p);
  if (unknown.empty()) return out;
  std::set<int> numbers;
  for (int i = 0; i < unknown.field_count(); ++i) numbers.insert(unknown.field(i).number());
  for (const int number : numbers) {
    out.push_back(number == kStorageField ? std::string("storage") : absl::StrCat("field ", number));
  }
  return out;
}

absl::Status FromProto(const pb::Node& p, const std::string& file, std::size_t offset, Node& n) {
  n.id = p.id();
  n.name = p.name();
  n.type = static_cast<std::int32_t>(p.type());
  n.ctrl_deps.assign(p.ctrl_deps().begin(), p.ctrl_deps().end());
  n.data_deps.assign(p.data_deps().begin(), p.data_deps().end());
  n.start_time_micros = p.start_time_micros();
  n.duration_micros = p.duration_micros();
  n.unmodelled_fields = Unmodelled(p);
  n.offset = offset;
  auto attrs = AttrsOf(p.attr(), Owner{file, p.id(), offset});
  if (!attrs.ok()) return attrs.status();
  n.attrs = *std::move(attrs);
  return absl::OkStatus();
}

// Appends `m` with its length prefix.
void AppendFramed(const google::protobuf::Message& m, std::string& out) {
  const std::size_t size = m.ByteSizeLong();
  std::uint8_t prefix[kMaxLengthPrefixBytes];
  const std::uint8_t* prefix_end =
      google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<std::uint32_t>(size), prefix);
  out.append(reinterpret_cast<const char*>(prefix), static_cast<std::size_t>(prefix_end - prefix));
  const std::size_t at = out.size();
  out.resize(at + size);
  m.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out.data() + at));
}

// How many whole frames follow `at`, to size the node vector once (no node is moved while it
// grows, nor memory held twice); a bad prefix ends the count, the decoding loop names it.
std::size_t CountFrames(absl::string_view bytes, std::size_t at) noexcept {
  std::size_t count = 0;
  std::uint64_t size = 0;
  while (at < bytes.size() && ReadVarint(bytes, at, bytes.size(), kMaxLengthPrefixBytes, size) == VarintRead::kOk &&
         size <= bytes.size() - at) {
    at += static_cast<std::size_t>(size);
    ++count;
  }
  return count;
}

// The GlobalMetadata at the start of `bytes`; sets `end` to the offset after it.
absl::Status DecodeMetadata(absl::string_view bytes, const std::string& file, Trace& t, std::size_t& end) {
  if (bytes.empty()) return NotATrace(file, "an empty file, without the GlobalMetadata", 0);
  if (bytes.substr(0, kHdf5Signature.size()) == kHdf5Signature) return NotATrace(file, "an HDF5 file's signature", 0);
  auto frame = ReadFrame(bytes, 0, file, "the metadata");
  if (!frame.ok()) return frame.status();
  const Frame& f = *frame;
  if (f.size > Remaining(bytes, f)) {
    // Cut short, or the length prefix of something else: the bytes that are there decide.
    if (auto fault = FindFault(bytes, f.begin, bytes.size(), MetadataField)) {
      return NotATrace(file, absl::StrCat(fault->what, " in the metadata"), fault->at);
    }
    return Truncated(file, 0, absl::StrCat("the metadata's length says ", f.size, " bytes, ", Remaining(bytes, f),
                                           " remain"));
  }
  pb::GlobalMetadata meta;
  // Fields unknown to the metadata are taken as another format: the schema has only two.
  if (!meta.ParseFromArray(bytes.data() + f.begin, static_cast<int>(f.size)) ||
      !meta.GetReflection()->GetUnknownFields(meta).empty()) {
    return ParseFailure(bytes, f, file, "the metadata", MetadataField);
  }
  t.version = meta.version();
  auto attrs = AttrsOf(meta.attr(), Owner{file, std::nullopt, 0});
  if (!attrs.ok()) return attrs.status();
  t.attrs = *std::move(attrs);
  end = f.begin + static_cast<std::size_t>(f.size);
  return absl::OkStatus();
}

// ---- Files.

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  // Read straight into the string, sized from the file's size plus one byte, so that the end
  // of the file is seen without growing it (it grows only for a file that grew meanwhile).
  struct stat st {};
  const std::size_t expected = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
  std::string bytes(expected + 1, '\0');
  std::size_t used = 0;
  while (true) {
    if (used == bytes.size()) bytes.resize(2 * bytes.size());
    const ssize_t n = ::read(fd, bytes.data() + used, bytes.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot read at byte ", used));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  bytes.resize(used);
  return bytes;
}

// Writes `bytes` to `path + ".tmp-<pid>"`, flushes it to disk and renames it to `path`,
// creating the parent directories; the temporary file is removed on failure.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(path, ": cannot create its directory: ", ec.message()));
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot create"));
  absl::Status status;
  std::size_t done = 0;
  while (status.ok() && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot write at byte ", done));
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (status.ok() && ::fsync(fd) != 0) status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot flush"));
  if (::close(fd) != 0 && status.ok()) status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot close"));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot rename ", tmp, " to it"));
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

// ---- Trace sets: `<prefix>.<rank>.et` and `<prefix>.comm_groups.json`.

constexpr absl::string_view kTraceSuffix = ".et";
constexpr absl::string_view kCommGroupsSuffix = ".comm_groups.json";

std::string RankFile(const std::string& prefix, int rank) { return absl::StrCat(prefix, ".", rank, kTraceSuffix); }

// `<base>.<rank>.et` split into base and rank (a decimal without leading zeros).
std::optional<std::pair<std::string, int>> SplitRankFile(absl::string_view name) {
  if (name.size() <= kTraceSuffix.size() || name.substr(name.size() - kTraceSuffix.size()) != kTraceSuffix) {
    return std::nullopt;
  }
  name.remove_suffix(kTraceSuffix.size());
  const std::size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return std::nullopt;
  const absl::string_view digits = name.substr(dot + 1);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int rank = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    rank = rank * 10 + (c - '0');
  }
  return std::make_pair(std::string(name.substr(0, dot)), rank);
}

// Every trace set's ranks in `dir`, by base name.
std::map<std::string, std::set<int>> TraceFilesIn(const std::filesystem::path& dir) {
  std::map<std::string, std::set<int>> sets;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    if (auto split = SplitRankFile(it->path().filename().string())) sets[split->first].insert(split->second);
  }
  return sets;
}

std::string Describe(const std::map<std::string, std::set<int>>& sets) {
  std::vector<std::string> parts;
  for (const auto& [base, ranks] : sets) {
    parts.push_back(absl::StrCat(base, " (ranks ", absl::StrJoin(ranks, ", "), ")"));
  }
  return absl::StrJoin(parts, "; ");
}

// The prefix of the set `dir_or_prefix` names and its number of ranks, checked contiguous.
absl::StatusOr<std::pair<std::string, int>> FindSet(const std::string& dir_or_prefix) {
  std::error_code ec;
  std::filesystem::path dir, base;
  std::string prefix = dir_or_prefix;
  if (std::filesystem::is_directory(dir_or_prefix, ec)) {
    const auto sets = TraceFilesIn(dir_or_prefix);
    if (sets.empty()) {
      return absl::NotFoundError(absl::StrCat(dir_or_prefix, ": no trace files (<prefix>.<rank>", kTraceSuffix, ")"));
    }
    if (sets.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(dir_or_prefix, ": more than one trace set: ", Describe(sets),
                                                     "; name one by its prefix"));
    }
    dir = dir_or_prefix;
    base = sets.begin()->first;
    prefix = (dir / base).string();
  } else {
    const std::filesystem::path p(dir_or_prefix);
    dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
    base = p.filename();
  }
  const auto sets = TraceFilesIn(dir);
  const auto found = sets.find(base.string());
  if (found == sets.end() || !found->second.contains(0)) {
    return absl::NotFoundError(absl::StrCat(RankFile(prefix, 0), ": no such file (rank 0 of the trace set ", prefix,
                                            ")"));
  }
  const std::set<int>& ranks = found->second;
  const int count = static_cast<int>(ranks.size());
  if (*ranks.rbegin() != count - 1) {
    int missing = 0;
    while (ranks.contains(missing)) ++missing;
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": ranks must be contiguous from 0: ",
                                                   RankFile(prefix, missing), " is missing, but ",
                                                   RankFile(prefix, *ranks.rbegin()), " exists"));
  }
  return std::make_pair(prefix, count);
}

// ---- The communicator group JSON.

class GroupParser {
 public:
  GroupParser(absl::string_view json, const std::string& file) : json_(json), file_(file) {}

  absl::StatusOr<std::vector<std::pair<std::string, std::vector<int>>>> Parse() {
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    std::set<std::string> seen;
    if (!Expect('{')) return Error("expected '{'");
    if (!Peek('}')) {
      while (true) {
        SkipSpace();
        const std::size_t key_at = pos_;
        auto name = String();
        if (!name.ok()) return name.status();
        if (!seen.insert(*name).second) return ErrorAt(key_at, absl::StrCat("group \"", *name, "\" appears twice"));
        if (!Expect(':')) return Error("expected ':' after a group name");
        auto ranks = Ranks();
        if (!ranks.ok()) return ranks.status();
        groups.emplace_back(*std::move(name), *std::move(ranks));
        if (Expect(',')) continue;
        if (Peek('}')) break;
        return Error("expected ',' or '}'");
      }
    }
    ++pos_;  // the '}' seen above
    SkipSpace();
    if (pos_ != json_.size()) return Error("unexpected text after the object");
    return groups;
  }

 private:
  void SkipSpace() noexcept {
    while (pos_ < json_.size() && (json_[pos_] == ' ' || json_[pos_] == '\t' || json_[pos_] == '\n' ||
                                   json_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // Skips space, then consumes `c` if it is next.
  bool Expect(char c) noexcept {
    SkipSpace();
    if (pos_ < json_.size() && json_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) noexcept {
    SkipSpace();
    return pos_ < json_.size() && json_[pos_] == c;
  }
  absl::Status ErrorAt(std::size_t at, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": not a communicator group file: ", what, " at byte ", at));
  }
  absl::Status Error(absl::string_view what) const {
    return ErrorAt(pos_, pos_ < json_.size() ? what : absl::StrCat(what, " (the text ends)"));
  }

  // A string with the escapes \" \\ \/ (group names need no others).
  absl::StatusOr<std::string> String() {
    if (!Expect('"')) return Error("expected a group name in double quotes");
    std::string out;
    while (pos_ < json_.size() && json_[pos_] != '"') {
      char c = json_[pos_];
      if (static_cast<unsigned char>(c) < 0x20) return Error("a control character in a group name");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= json_.size() || (json_[pos_] != '"' && json_[pos_] != '\\' && json_[pos_] != '/')) {
          return Error("an escape other than \\\" \\\\ \\/ in a group name");
        }
        c = json_[pos_];
      }
      out += c;
      ++pos_;
    }
    if (pos_ >= json_.size()) return Error("a group name without its closing quote");
    ++pos_;
    return out;
  }

  absl::StatusOr<std::vector<int>> Ranks() {
    if (!Expect('[')) return Error("expected '[' before a group's ranks");
    std::vector<int> ranks;
    if (Expect(']')) return ranks;
    while (true) {
      SkipSpace();
      const std::size_t at = pos_;
      std::int64_t v = 0;
      std::size_t digits = 0;
      while (pos_ < json_.size() && json_[pos_] >= '0' && json_[pos_] <= '9') {
        v = v * 10 + (json_[pos_++] - '0');
        if (v > std::numeric_limits<int>::max()) return ErrorAt(at, "a rank above the int range");
        ++digits;
      }
      if (digits == 0) return ErrorAt(at, "expected a rank (a non-negative integer)");
      if (digits > 1 && json_[at] == '0') return ErrorAt(at, "a rank with a leading zero");
      ranks.push_back(static_cast<int>(v));
      if (Expect(',')) continue;
      if (Expect(']')) return ranks;
      return Error("expected ',' or ']' in a group's ranks");
    }
  }

  absl::string_view json_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

std::string QuotedName(const std::string& name) {
  std::string out = "\"";
  for (const char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

std::string EncodeTrace(const Trace& trace) {
  std::string out;
  pb::GlobalMetadata meta;
  meta.set_version(trace.version);
  for (const Attr& a : trace.attrs) ToProto(a, *meta.add_attr());
  AppendFramed(meta, out);
  pb::Node node;
  for (const Node& n : trace.nodes) {
    ToProto(n, node);
    AppendFramed(node, out);
  }
  return out;
}

absl::StatusOr<Trace> DecodeTrace(const std::string& bytes, const std::string& name_for_errors) {
  const std::string& file = name_for_errors;
  Trace t;
  std::size_t at = 0;
  if (absl::Status s = DecodeMetadata(bytes, file, t, at); !s.ok()) return s;
  t.nodes.reserve(CountFrames(bytes, at));
  pb::Node msg;
  while (at < bytes.size()) {
    auto frame = ReadFrame(bytes, at, file, "a node");
    if (!frame.ok()) return frame.status();
    const Frame& f = *frame;
    if (f.size > Remaining(bytes, f)) {
      return Truncated(file, at, absl::StrCat("a node's length says ", f.size, " bytes, ", Remaining(bytes, f),
                                              " remain"));
    }
    if (!msg.ParseFromArray(bytes.data() + f.begin, static_cast<int>(f.size))) {
      return ParseFailure(bytes, f, file, "a node", NodeField);
    }
    if (absl::Status s = FromProto(msg, file, at, t.nodes.emplace_back()); !s.ok()) return s;
    at = f.begin + static_cast<std::size_t>(f.size);
  }
  return t;
}

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeTrace(*bytes, path);
}

absl::Status WriteTrace(const Trace& trace, const std::string& path) {
  return WriteFileAtomically(path, EncodeTrace(trace));
}

absl::StatusOr<TraceSet> ReadTraceSet(const std::string& dir_or_prefix) {
  auto found = FindSet(dir_or_prefix);
  if (!found.ok()) return found.status();
  const auto& [prefix, count] = *found;
  TraceSet set;
  set.ranks.reserve(static_cast<std::size_t>(count));
  for (int r = 0; r < count; ++r) {
    auto trace = ReadTrace(RankFile(prefix, r));
    if (!trace.ok()) return trace.status();
    set.ranks.push_back(*std::move(trace));
  }
  const std::string groups_file = absl::StrCat(prefix, kCommGroupsSuffix);
  std::error_code ec;
  if (!std::filesystem::exists(groups_file, ec)) return set;
  auto json = ReadFile(groups_file);
  if (!json.ok()) return json.status();
  auto groups = DecodeCommGroups(*json, groups_file);
  if (!groups.ok()) return groups.status();
  for (const auto& [name, ranks] : *groups) {
    for (const int r : ranks) {
      if (r >= count) {
        return absl::InvalidArgumentError(absl::StrCat(groups_file, ": group \"", name, "\" lists rank ", r,
                                                       ", but the set has ", count, " ranks"));
      }
    }
  }
  set.comm_groups = *std::move(groups);
  return set;
}

absl::StatusOr<std::vector<std::string>> WriteTraceSet(const TraceSet& set, const std::string& prefix) {
  const std::filesystem::path p(prefix);
  if (p.filename().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": a trace set's prefix must end in a file name"));
  }
  if (set.ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(prefix, ": a trace set without ranks"));
  std::vector<std::string> written;
  for (std::size_t r = 0; r < set.ranks.size(); ++r) {
    written.push_back(RankFile(prefix, static_cast<int>(r)));
    if (absl::Status s = WriteTrace(set.ranks[r], written.back()); !s.ok()) return s;
  }
  const std::string groups_file = absl::StrCat(prefix, kCommGroupsSuffix);
  if (!set.comm_groups.empty()) {
    written.push_back(groups_file);
    if (absl::Status s = WriteFileAtomically(groups_file, EncodeCommGroups(set.comm_groups)); !s.ok()) return s;
  }
  // Files of an earlier set under the same prefix would join this one when it is read: a
  // rank beyond this set's last, or a group file this set does not have.
  std::vector<std::string> stale;
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  const auto sets = TraceFilesIn(dir);
  if (const auto earlier = sets.find(p.filename().string()); earlier != sets.end()) {
    for (const int r : earlier->second) {
      if (r >= static_cast<int>(set.ranks.size())) stale.push_back(RankFile(prefix, r));
    }
  }
  if (set.comm_groups.empty()) stale.push_back(groups_file);
  for (const std::string& file : stale) {
    std::error_code ec;
    std::filesystem::remove(file, ec);
    if (ec) return absl::UnavailableError(absl::StrCat(file, ": cannot remove this earlier file: ", ec.message()));
  }
  return written;
}

std::string EncodeCommGroups(const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  if (groups.empty()) return "{}\n";
  std::string out = "{\n";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    absl::StrAppend(&out, "  ", QuotedName(groups[i].first), ": [", absl::StrJoin(groups[i].second, ", "), "]",
                    i + 1 < groups.size() ? ",\n" : "\n");
  }
  out += "}\n";
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::vector<int>>>> DecodeCommGroups(
    const std::string& json, const std::string& name_for_errors) {
  return GroupParser(json, name_for_errors).Parse();
}

}  // namespace testbed::chakra
