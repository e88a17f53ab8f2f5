// Chakra traces as bytes: the varint framing and the conversion between the schema's messages
// (et_def.proto, the only place its generated code is seen) and the plain structs of
// et_trace.h. Files, trace sets and the communicator group JSON are in et_files.cc.
#include "chakra/et_io.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
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

}  // namespace testbed::chakra
