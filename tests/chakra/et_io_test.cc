// Chakra trace files: every field and attribute type through the writer and back (with the
// wire type of each integer and float kept), bytes encoded by hand decoding to the node they
// say (the wire format, not only our writer's), damaged and foreign files naming the file and
// the byte, fields of newer schemas read past and named, trace sets by prefix and by
// directory, and the communicator group JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "chakra/et_io.h"

namespace testbed::chakra {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fresh directory per test, removed after it.
class EtIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("chakra_et_io_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string WriteBytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(Path(name), std::ios::binary) << bytes;
    return Path(name);
  }

  std::filesystem::path dir_;
};

Attr MakeAttr(std::string name, Attr::Value value, int wire = 0) {
  return Attr{std::move(name), std::move(value), wire};
}

void ExpectSameAttrs(const std::vector<Attr>& got, const std::vector<Attr>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].value, want[i].value) << got[i].name;
    EXPECT_EQ(got[i].wire, want[i].wire) << got[i].name;
  }
}

// A small three-node trace: metadata "v" (4 bytes framed), node 1 (3 bytes framed, at byte
// 4), node 2 named "second" (11 bytes framed, at byte 7), node 3 (at byte 18).
Trace SmallTrace() {
  Trace t;
  t.version = "v";
  Node a, b, c;
  a.id = 1;
  b.id = 2;
  b.name = "second";
  c.id = 3;
  t.nodes = {a, b, c};
  return t;
}

TEST(EtTrace, NamesTypesAndFindsAttributes) {
  EXPECT_STREQ(NodeTypeName(4), "COMP_NODE");
  EXPECT_STREQ(NodeTypeName(10), "CHECKPOINT_NODE");
  EXPECT_STREQ(NodeTypeName(11), "UNKNOWN");
  EXPECT_STREQ(NodeTypeName(-1), "UNKNOWN");
  EXPECT_STREQ(CollTypeName(0), "ALL_REDUCE");
  EXPECT_STREQ(CollTypeName(8), "REDUCE_SCATTER_BLOCK");
  EXPECT_STREQ(CollTypeName(10), "UNKNOWN");
  Node n;
  n.attrs = {MakeAttr("comm_type", std::int64_t{7}), MakeAttr("pg_name", std::string("1"))};
  ASSERT_NE(n.Find("pg_name"), nullptr);
  EXPECT_EQ(*n.Find("pg_name")->AsString(), "1");
  EXPECT_EQ(*n.Find("comm_type")->AsInt(), 7);
  EXPECT_EQ(n.Find("comm_type")->AsDouble(), nullptr);
  EXPECT_EQ(n.Find("comm_size"), nullptr);
}

TEST_F(EtIo, EveryFieldAndAttributeTypeRoundTrips) {
  Trace t;
  t.version = "0.0.4";
  t.attrs = {MakeAttr("schema", std::string("1.0.2-chakra.0.0.4")), MakeAttr("ranks", std::int64_t{8})};
  Node n;
  n.id = 42;
  n.name = "allreduce_grads";
  n.type = static_cast<std::int32_t>(NodeType::kCommColl);
  n.ctrl_deps = {40, 41};
  n.data_deps = {7, 1ull << 40};
  n.start_time_micros = 123456789;
  n.duration_micros = 250;
  n.attrs = {
      MakeAttr("int", std::int64_t{-5}),
      MakeAttr("double", 2.5),
      MakeAttr("bool", true),
      MakeAttr("string", std::string("pg 1")),
      MakeAttr("ints", std::vector<std::int64_t>{1, -2, 3}),
      MakeAttr("doubles", std::vector<double>{0.5, -1e300}),
      MakeAttr("bools", std::vector<bool>{true, false, true}),
      MakeAttr("strings", std::vector<std::string>{"a", "", "c"}),
      MakeAttr("unset", std::monostate{}),
      // Wire types other than the default, kept.
      MakeAttr("comm_size", std::int64_t{1} << 40, 13),       // uint64_val
      MakeAttr("comm_type", std::int64_t{7}, 7),              // int32_val
      MakeAttr("delta", std::int64_t{-3}, 17),                // sint64_val
      MakeAttr("ratio", 1.5, 5),                              // float_val
      MakeAttr("fixed", std::int64_t{99}, 21),                // fixed64_val
      MakeAttr("sizes", std::vector<std::int64_t>{4, 5}, 12),  // uint32 list
      MakeAttr("halves", std::vector<double>{0.5, 0.25}, 6),   // float list
      MakeAttr("blob", std::string("\x01\x02", 2), 31),       // bytes_val
      MakeAttr("blobs", std::vector<std::string>{"x"}, 32),   // bytes list
  };
  Node unknown_type;
  unknown_type.id = 43;
  unknown_type.type = 42;  // not in the schema: kept as read
  t.nodes = {n, unknown_type};

  ASSERT_TRUE(WriteTrace(t, Path("sub/dir/rank.0.et")).ok());
  auto got = ReadTrace(Path("sub/dir/rank.0.et"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, "0.0.4");
  ExpectSameAttrs(got->attrs, {MakeAttr("schema", std::string("1.0.2-chakra.0.0.4"), 29),
                               MakeAttr("ranks", std::int64_t{8}, 9)});
  ASSERT_EQ(got->nodes.size(), 2u);
  const Node& g = got->nodes[0];
  EXPECT_EQ(g.id, 42u);
  EXPECT_EQ(g.name, "allreduce_grads");
  EXPECT_EQ(g.type, 7);
  EXPECT_THAT(g.ctrl_deps, ElementsAre(40u, 41u));
  EXPECT_THAT(g.data_deps, ElementsAre(7u, 1ull << 40));
  EXPECT_EQ(g.start_time_micros, 123456789u);
  EXPECT_EQ(g.duration_micros, 250u);
  EXPECT_TRUE(g.unmodelled_fields.empty());
  // The metadata is 7 + 31 + 11 bytes (version, two attributes), framed 50: the first node's
  // length prefix is at byte 50.
  EXPECT_EQ(g.offset, 50u);
  std::vector<Attr> want = n.attrs;
  const int chosen[] = {9, 3, 27, 29, 10, 4, 28, 30, 0};  // by type, for the attributes built without a wire
  for (std::size_t i = 0; i < std::size(chosen); ++i) want[i].wire = chosen[i];
  ExpectSameAttrs(g.attrs, want);
  EXPECT_EQ(got->nodes[1].id, 43u);
  EXPECT_EQ(got->nodes[1].type, 42);
  EXPECT_STREQ(NodeTypeName(got->nodes[1].type), "UNKNOWN");
  // The temporary file was renamed away.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "sub/dir")) {
    EXPECT_EQ(e.path().filename().string(), "rank.0.et");
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(EtIo, AWireTypeTheValueNoLongerFitsFallsBackToTheValuesType) {
  Trace t;
  Node n;
  n.attrs = {
      MakeAttr("big", std::int64_t{1} << 40, 7),                 // int32_val cannot hold it: int64
      MakeAttr("negative", std::int64_t{-1}, 13),                // uint64_val cannot: int64
      MakeAttr("tenth", 0.1, 5),                                 // not exact in a float: double
      MakeAttr("list", std::vector<std::int64_t>{1, -1}, 12),    // uint32 list: int64 list
      MakeAttr("not_utf8", std::string("\xff\xfe", 2), 29),      // string_val must be UTF-8: bytes
      MakeAttr("mismatch", true, 9),                             // a wire of another type: bool
  };
  t.nodes = {n};
  auto got = DecodeTrace(EncodeTrace(t), "t.et");
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameAttrs(got->nodes[0].attrs, {
                                           MakeAttr("big", std::int64_t{1} << 40, 9),
                                           MakeAttr("negative", std::int64_t{-1}, 9),
                                           MakeAttr("tenth", 0.1, 3),
                                           MakeAttr("list", std::vector<std::int64_t>{1, -1}, 10),
                                           MakeAttr("not_utf8", std::string("\xff\xfe", 2), 31),
                                           MakeAttr("mismatch", true, 27),
                                       });
}

// GlobalMetadata{version: "0.0.4"}: field 1, wire type 2 (tag 0x0a), 5 bytes; framed: 8 bytes.
const std::string kMetadata = std::string("\x07\x0a\x05", 3) + "0.0.4";

TEST(EtWire, BytesEncodedByHandDecodeToTheirNode) {
  const std::string node =
      std::string("\x08\x07", 2)                   // id = 7
      + std::string("\x12\x02mm", 4)               // name = "mm"
      + std::string("\x18\x04", 2)                 // type = COMP_NODE
      + std::string("\x22\x01\x03", 3)             // ctrl_deps = [3], packed
      + std::string("\x28\x01\x28\x02", 4)         // data_deps = [1, 2], one by one
      + std::string("\x30\xac\x02", 3)             // start_time_micros = 300
      + std::string("\x38\x05", 2)                 // duration_micros = 5
      + std::string("\x52\x0b\x0a\x07num_ops\x48\x09", 13)  // attr {name "num_ops", int64_val 9}
      + std::string("\x52\x0c\x0a\x03" "big" "\x68\x80\x80\x80\x80\x80\x20", 14)  // uint64_val 2^40
      + std::string("\x52\x06\x0a\x01s\x88\x01\x05", 8)        // sint64_val -3 (zigzag 5)
      + std::string("\x52\x08\x0a\x01" "f" "\x2d\x00\x00\xc0\x3f", 10)  // float_val 1.5
      + std::string("\x52\x08\x0a\x01k\xea\x01\x02hi", 10);     // string_val "hi"
  ASSERT_EQ(node.size(), 75u);
  const std::string bytes = kMetadata + "\x4b" + node;

  auto t = DecodeTrace(bytes, "hand.et");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->version, "0.0.4");
  EXPECT_TRUE(t->attrs.empty());
  ASSERT_EQ(t->nodes.size(), 1u);
  const Node& n = t->nodes[0];
  EXPECT_EQ(n.id, 7u);
  EXPECT_EQ(n.name, "mm");
  EXPECT_EQ(n.type, static_cast<std::int32_t>(NodeType::kComp));
  EXPECT_THAT(n.ctrl_deps, ElementsAre(3u));
  EXPECT_THAT(n.data_deps, ElementsAre(1u, 2u));
  EXPECT_EQ(n.start_time_micros, 300u);
  EXPECT_EQ(n.duration_micros, 5u);
  EXPECT_EQ(n.offset, 8u);
  EXPECT_TRUE(n.unmodelled_fields.empty());
  ExpectSameAttrs(n.attrs, {MakeAttr("num_ops", std::int64_t{9}, 9), MakeAttr("big", std::int64_t{1} << 40, 13),
                            MakeAttr("s", std::int64_t{-3}, 17), MakeAttr("f", 1.5, 5),
                            MakeAttr("k", std::string("hi"), 29)});
  // And our writer gives these bytes for this node, field for field, but for data_deps, which
  // it packs (proto3's default for repeated integers).
  Trace again;
  again.version = "0.0.4";
  again.nodes = {n};
  std::string packed = bytes;
  packed.replace(20, 4, "\x2a\x02\x01\x02");
  EXPECT_EQ(EncodeTrace(again), packed);
}

TEST(EtWire, FieldsOfNewerSchemasAreReadPastAndNamed) {
  const std::string node = std::string("\x08\x01", 2)        // id = 1
                           + std::string("\x42\x03\x0a\x01x", 5)  // inputs {values: "x"}
                           + std::string("\x4a\x00", 2)           // outputs {}: says nothing
                           + std::string("\x5a\x02\x08\x01", 4)   // storage (field 11) {1: 1}
                           + std::string("\x78\x01", 2);          // field 15 = 1
  auto t = DecodeTrace(kMetadata + std::string(1, static_cast<char>(node.size())) + node, "new.et");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->nodes.size(), 1u);
  EXPECT_EQ(t->nodes[0].id, 1u);
  EXPECT_THAT(t->nodes[0].unmodelled_fields, ElementsAre("inputs", "storage", "field 15"));
}

TEST(EtWire, AnUnsignedValueAboveInt64IsAnErrorNamingTheAttribute) {
  // node {id 5, attr {name "u", uint64_val 2^63}}
  const std::string node = std::string("\x08\x05\x52\x0e\x0a\x01u\x68", 8) + std::string(9, '\x80') + "\x01";
  auto t = DecodeTrace(kMetadata + "\x12" + node, "big.et");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(t.status().message(),
            "big.et: node 5 at byte 8: attribute \"u\" holds 9223372036854775808, above the int64 range");
}

TEST_F(EtIo, ATruncatedFileNamesTheByteWhereItIsCut) {
  const std::string bytes = EncodeTrace(SmallTrace());
  auto full = DecodeTrace(bytes, "full.et");
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->nodes.size(), 3u);
  EXPECT_EQ(full->nodes[1].offset, 7u);
  EXPECT_EQ(full->nodes[2].offset, 18u);

  // In the middle of the second node: its prefix (10) and 4 of its 10 bytes remain.
  auto cut = ReadTrace(WriteBytes("cut.0.et", bytes.substr(0, 12)));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cut.status().message(),
            absl::StrCat(Path("cut.0.et"), ": truncated at byte 7 (a node's length says 10 bytes, 4 remain)"));

  // In a length prefix: a varint's continuation byte, and nothing after it.
  auto in_prefix = DecodeTrace(bytes.substr(0, 7) + "\x80", "p.et");
  ASSERT_FALSE(in_prefix.ok());
  EXPECT_EQ(in_prefix.status().message(), "p.et: truncated at byte 7 (the length prefix of a node is cut short)");

  // In the metadata.
  auto in_metadata = DecodeTrace(bytes.substr(0, 3), "m.et");
  ASSERT_FALSE(in_metadata.ok());
  EXPECT_EQ(in_metadata.status().message(), "m.et: truncated at byte 0 (the metadata's length says 3 bytes, 2 remain)");
}

TEST_F(EtIo, OtherFormatsAreNotChakraTraces) {
  const std::string text = WriteBytes("notes.et", "# not a trace\nhello world\n");
  auto t = ReadTrace(text);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(), HasSubstr(text + ": not a Chakra trace: "));
  EXPECT_THAT(t.status().message(), HasSubstr(" at byte 1"));

  const std::string hdf5 = WriteBytes("results.h5", std::string("\x89HDF\r\n\x1a\n", 8) + std::string(512, '\0'));
  auto h = ReadTrace(hdf5);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(h.status().message(), hdf5 + ": not a Chakra trace: an HDF5 file's signature at byte 0");

  // A longer text whose first byte is a length it has room for.
  auto long_text = DecodeTrace(std::string("\x30") + std::string(200, 'a'), "a.et");
  ASSERT_FALSE(long_text.ok());
  EXPECT_EQ(long_text.status().message(),
            "a.et: not a Chakra trace: field 12 with wire type 1 in the metadata at byte 1");

  auto long_prefix = DecodeTrace(std::string("\xff\xff\xff\xff\xff\x01", 6), "l.et");
  ASSERT_FALSE(long_prefix.ok());
  EXPECT_EQ(long_prefix.status().message(), "l.et: not a Chakra trace: a length prefix longer than 5 bytes at byte 0");

  auto huge = DecodeTrace(std::string("\x80\x80\x80\x80\x08", 5), "h.et");  // 2^31 bytes
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "h.et: not a Chakra trace: a length prefix of 2147483648 bytes (above 1 GiB) at byte 0");

  // A node whose bytes are not a node: field 3 (type) with wire type 7, which does not exist.
  auto bad_node = DecodeTrace(kMetadata + std::string("\x03\x08\x01\x1f", 4), "n.et");
  ASSERT_FALSE(bad_node.ok());
  EXPECT_EQ(bad_node.status().message(), "n.et: not a Chakra trace: field 3 with wire type 7 in a node at byte 11");

  auto empty = ReadTrace(WriteBytes("empty.et", ""));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(empty.status().message(),
            Path("empty.et") + ": not a Chakra trace: an empty file, without the GlobalMetadata at byte 0");

  auto missing = ReadTrace(Path("missing.et"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(Path("missing.et")));
}

TraceSet ThreeRanks() {
  TraceSet set;
  for (int r = 0; r < 3; ++r) {
    Trace t = SmallTrace();
    t.version = absl::StrCat("rank ", r);
    set.ranks.push_back(t);
  }
  set.comm_groups = {{"0", {0, 1, 2}}, {"1", {0, 2}}};
  return set;
}

void ExpectThreeRanks(const absl::StatusOr<TraceSet>& set) {
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(set->ranks[static_cast<std::size_t>(r)].version, absl::StrCat("rank ", r));
    EXPECT_EQ(set->ranks[static_cast<std::size_t>(r)].nodes.size(), 3u);
  }
  using Groups = std::vector<std::pair<std::string, std::vector<int>>>;
  EXPECT_EQ(set->comm_groups, (Groups{{"0", {0, 1, 2}}, {"1", {0, 2}}}));
}

TEST_F(EtIo, TraceSetsReadByPrefixAndByDirectory) {
  auto written = WriteTraceSet(ThreeRanks(), Path("job/llama"));
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_THAT(*written, ElementsAre(Path("job/llama.0.et"), Path("job/llama.1.et"), Path("job/llama.2.et"),
                                    Path("job/llama.comm_groups.json")));
  ExpectThreeRanks(ReadTraceSet(Path("job/llama")));
  ExpectThreeRanks(ReadTraceSet(Path("job")));

  // Rewriting with fewer ranks and no groups leaves nothing of the earlier set.
  TraceSet two = ThreeRanks();
  two.ranks.resize(2);
  two.comm_groups.clear();
  ASSERT_TRUE(WriteTraceSet(two, Path("job/llama")).ok());
  auto again = ReadTraceSet(Path("job"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ranks.size(), 2u);
  EXPECT_TRUE(again->comm_groups.empty());
  EXPECT_FALSE(std::filesystem::exists(Path("job/llama.2.et")));
  EXPECT_FALSE(std::filesystem::exists(Path("job/llama.comm_groups.json")));
}

TEST_F(EtIo, TraceSetRanksMustBeContiguousAndTheSetUnambiguous) {
  ASSERT_TRUE(WriteTraceSet(ThreeRanks(), Path("job/llama")).ok());
  std::filesystem::remove(Path("job/llama.1.et"));
  auto gap = ReadTraceSet(Path("job/llama"));
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gap.status().message(), absl::StrCat(Path("job/llama"), ": ranks must be contiguous from 0: ",
                                                 Path("job/llama.1.et"), " is missing, but ", Path("job/llama.2.et"),
                                                 " exists"));

  auto missing = ReadTraceSet(Path("job/gpt"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(Path("job/gpt.0.et")));

  ASSERT_TRUE(WriteTrace(SmallTrace(), Path("job/gpt.0.et")).ok());
  auto two_sets = ReadTraceSet(Path("job"));
  ASSERT_FALSE(two_sets.ok());
  EXPECT_EQ(two_sets.status().message(),
            absl::StrCat(Path("job"), ": more than one trace set: gpt (ranks 0); llama (ranks 0, 2); name one by its "
                                      "prefix"));

  auto none = ReadTraceSet(Path("job/empty_dir_is_not_here"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  std::filesystem::create_directories(Path("nothing"));
  auto empty_dir = ReadTraceSet(Path("nothing"));
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_EQ(empty_dir.status().code(), absl::StatusCode::kNotFound);

  // A broken rank file is named by the set's error.
  ASSERT_TRUE(WriteTraceSet(ThreeRanks(), Path("other/set")).ok());
  WriteBytes("other/set.1.et", "\x05\x0a");
  auto broken = ReadTraceSet(Path("other/set"));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message(),
            Path("other/set.1.et") + ": truncated at byte 0 (the metadata's length says 5 bytes, 1 remain)");

  // A group naming a rank the set does not have.
  ASSERT_TRUE(WriteTrace(SmallTrace(), Path("other/set.1.et")).ok());
  WriteBytes("other/set.comm_groups.json", "{\"0\": [0, 3]}");
  auto bad_group = ReadTraceSet(Path("other/set"));
  ASSERT_FALSE(bad_group.ok());
  EXPECT_EQ(bad_group.status().message(),
            Path("other/set.comm_groups.json") + ": group \"0\" lists rank 3, but the set has 3 ranks");
}

TEST(CommGroups, RoundTripOneGroupPerLineInTheGivenOrder) {
  const std::vector<std::pair<std::string, std::vector<int>>> groups = {
      {"1", {0, 2}}, {"0", {0, 1, 2, 3}}, {"tp \"a\"", {}}};
  const std::string json = EncodeCommGroups(groups);
  EXPECT_EQ(json, "{\n  \"1\": [0, 2],\n  \"0\": [0, 1, 2, 3],\n  \"tp \\\"a\\\"\": []\n}\n");
  auto back = DecodeCommGroups(json, "g.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, groups);
  EXPECT_EQ(EncodeCommGroups({}), "{}\n");

  auto compact = DecodeCommGroups("{\"0\":[0,1,2,3],\"1\":[0,2]}", "c.json");
  ASSERT_TRUE(compact.ok()) << compact.status();
  using Groups = std::vector<std::pair<std::string, std::vector<int>>>;
  EXPECT_EQ(*compact, (Groups{{"0", {0, 1, 2, 3}}, {"1", {0, 2}}}));
  auto empty = DecodeCommGroups(" {\n} \n", "e.json");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST(CommGroups, MalformedFilesNameTheByte) {
  const auto message = [](const std::string& json) {
    auto groups = DecodeCommGroups(json, "g.json");
    EXPECT_FALSE(groups.ok()) << json;
    return std::string(groups.status().message());
  };
  EXPECT_EQ(message("{\"0\": [0, 1,, 2]}"),
            "g.json: not a communicator group file: expected a rank (a non-negative integer) at byte 12");
  EXPECT_EQ(message("{\"0\": [-1]}"),
            "g.json: not a communicator group file: expected a rank (a non-negative integer) at byte 7");
  EXPECT_EQ(message("{\"a\": [0], \"a\": [1]}"),
            "g.json: not a communicator group file: group \"a\" appears twice at byte 11");
  EXPECT_EQ(message("{\"0\": [0, 1]"),
            "g.json: not a communicator group file: expected ',' or '}' (the text ends) at byte 12");
  EXPECT_EQ(message("[0, 1]"), "g.json: not a communicator group file: expected '{' at byte 0");
  EXPECT_EQ(message("{\"0\": [01]}"), "g.json: not a communicator group file: a rank with a leading zero at byte 7");
  EXPECT_EQ(message("{\"0\": [0]} x"),
            "g.json: not a communicator group file: unexpected text after the object at byte 11");
  EXPECT_EQ(message("{0: [0]}"),
            "g.json: not a communicator group file: expected a group name in double quotes at byte 1");
}

}  // namespace
}  // namespace testbed::chakra
