// ConfigDoc: parse errors with file:line:column, positions of values, positions carried
// through merges (Set, Subtree) so that a late validation error still points at the source.
#include "config/config_doc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ConfigDocTest, SyntaxErrorNamesFileLineAndColumn) {
  // Line 3 is "micro_batch = = 4": the second '=' (column 15) is the unexpected character.
  auto doc = ConfigDoc::ParseString("[train]\n# comment\nmicro_batch = = 4\n", "exp.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(doc.status().message()), StartsWith("exp.toml:3:15: TOML syntax error"));
}

TEST(ConfigDocTest, UnterminatedStringErrorIsOnItsLine) {
  auto doc = ConfigDoc::ParseString("a = 1\nb = \"open\n", "x.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(std::string(doc.status().message()), StartsWith("x.toml:2:"));
}

TEST(ConfigDocTest, ParseFileOfMissingFileIsNotFound) {
  testing::TempDir dir;
  auto doc = ConfigDoc::ParseFile(dir / "nope.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(doc.status().message()), HasSubstr("nope.toml"));
}

TEST(ConfigDocTest, ParseFileUsesThePathAsSourceName) {
  testing::TempDir dir;
  const auto file = dir / "e.toml";
  testing::WriteFile(file, "[train]\nmicro_batch = 4\n");
  auto doc = ConfigDoc::ParseFile(file);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->file(), file.string());
  EXPECT_EQ(doc->Where({"train", "micro_batch"}).ToString(), file.string() + ":2:15");
}

TEST(ConfigDocTest, WhereGivesThePositionOfEachValue) {
  const std::string text =
      "top = 1\n"                         // line 1: value at column 7
      "[train]\n"                         // line 2
      "  micro_batch = 8\n"               // line 3: value at column 17
      "[[arm]]\n"                         // line 4
      "name = \"a\"\n"                    // line 5
      "partitioner = { use = \"x\", k = 3 }\n";  // line 6: k's value at column 32
  auto doc = ConfigDoc::ParseString(text, "f.toml");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->Where({"top"}).ToString(), "f.toml:1:7");
  EXPECT_EQ(doc->Where({"train", "micro_batch"}).ToString(), "f.toml:3:17");
  EXPECT_EQ(doc->Where({"arm", "[0]", "name"}).ToString(), "f.toml:5:8");
  EXPECT_EQ(doc->Where({"arm", "[0]", "partitioner", "k"}).ToString(), "f.toml:6:32");
  // A path that does not exist falls back to its nearest ancestor.
  EXPECT_EQ(doc->Where({"train", "nothing", "deeper"}).line, doc->Where({"train"}).line);
  EXPECT_EQ(doc->Where({"train"}).line, 2);
}

TEST(ConfigDocTest, SourceLocWithoutLineIsJustTheFile) {
  SourceLoc loc{"a.toml", 0, 0};
  EXPECT_EQ(loc.ToString(), "a.toml");
  EXPECT_EQ((SourceLoc{"a.toml", 3, 9}).ToString(), "a.toml:3:9");
}

TEST(ConfigDocTest, GetAddressesTablesAndArrayElements) {
  auto doc = ConfigDoc::ParseString("xs = [10, 20, 30]\n[a.b]\nc = \"d\"\n", "g.toml");
  ASSERT_TRUE(doc.ok());
  ASSERT_NE(doc->Get({"xs", "[2]"}), nullptr);
  EXPECT_EQ(doc->Get({"xs", "[2]"})->value<std::int64_t>(), 30);
  EXPECT_EQ(doc->Get({"xs", "[3]"}), nullptr);
  EXPECT_EQ(doc->Get({"xs", "2"}), nullptr);  // arrays only take "[i]"
  EXPECT_EQ(doc->Get({"a", "b", "c"})->value<std::string>(), "d");
  EXPECT_NE(doc->GetTable({"a", "b"}), nullptr);
  EXPECT_EQ(doc->GetTable({"a", "b", "c"}), nullptr);
  EXPECT_EQ(doc->Get({"a", "zz"}), nullptr);
}

TEST(ConfigDocTest, SetTakesPositionsFromTheOtherDocument) {
  auto base = ConfigDoc::ParseString("[train]\nmicro_batch = 1\nsteps = 5\n", "base.toml");
  auto over = ConfigDoc::ParseString("\n\n[over]\nvalue = 64\n", "over.toml");
  ASSERT_TRUE(base.ok() && over.ok());
  ASSERT_TRUE(base->Set({"train", "micro_batch"}, *over->Get({"over", "value"}), *over, {"over", "value"}).ok());
  EXPECT_EQ(base->Get({"train", "micro_batch"})->value<std::int64_t>(), 64);
  EXPECT_EQ(base->Where({"train", "micro_batch"}).ToString(), "over.toml:4:9");
  // Untouched keys keep their own positions.
  EXPECT_EQ(base->Where({"train", "steps"}).ToString(), "base.toml:3:9");
}

TEST(ConfigDocTest, SetOfATableCarriesPositionsOfEveryChild) {
  auto base = ConfigDoc::ParseString("[model]\nlayers = 2\nhidden = 8\n", "base.toml");
  auto other = ConfigDoc::ParseString("[m]\nlayers = 4\n\nheads = 2\n", "other.toml");
  ASSERT_TRUE(base.ok() && other.ok());
  ASSERT_TRUE(base->Set({"model"}, *other->Get({"m"}), *other, {"m"}).ok());
  EXPECT_EQ(base->Where({"model", "layers"}).ToString(), "other.toml:2:10");
  EXPECT_EQ(base->Where({"model", "heads"}).ToString(), "other.toml:4:9");
  // The replaced table's old key is gone, and so is its position.
  EXPECT_EQ(base->Get({"model", "hidden"}), nullptr);
  EXPECT_NE(base->Where({"model", "hidden"}).file, "base.toml");
}

TEST(ConfigDocTest, SetCreatesTablesAndExpandsComponentShorthand) {
  auto doc = ConfigDoc::ParseString("partitioner = \"merak\"\n", "s.toml");
  auto val = ConfigDoc::ParseString("v = 3\n", "--set partitioner.stages=3");
  ASSERT_TRUE(doc.ok() && val.ok());
  ASSERT_TRUE(doc->Set({"partitioner", "stages"}, *val->Get({"v"}), *val, {"v"}).ok());
  EXPECT_EQ(doc->Get({"partitioner", "use"})->value<std::string>(), "merak");
  EXPECT_EQ(doc->Get({"partitioner", "stages"})->value<std::int64_t>(), 3);
  EXPECT_EQ(doc->Where({"partitioner", "stages"}).file, "--set partitioner.stages=3");

  ASSERT_TRUE(doc->Set({"new", "deep", "key"}, *val->Get({"v"}), *val, {"v"}).ok());
  EXPECT_EQ(doc->Get({"new", "deep", "key"})->value<std::int64_t>(), 3);
}

TEST(ConfigDocTest, SetThroughANonTableFails) {
  auto doc = ConfigDoc::ParseString("x = 5\n", "s.toml");
  auto val = ConfigDoc::ParseString("v = 1\n", "v");
  ASSERT_TRUE(doc.ok() && val.ok());
  absl::Status st = doc->Set({"x", "y"}, *val->Get({"v"}), *val, {"v"});
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("'x' is not a table"));
  EXPECT_FALSE(doc->Set({}, *val->Get({"v"}), *val, {"v"}).ok());
}

TEST(ConfigDocTest, SubtreeKeepsPositions) {
  auto doc = ConfigDoc::ParseString("[node]\nname = \"n\"\n[node.link_types]\nfast = { bandwidth_gb_per_s = 5 }\n",
                                    "p.toml");
  ASSERT_TRUE(doc.ok());
  ConfigDoc sub = ConfigDoc::Subtree(*doc, {"node"});
  EXPECT_EQ(sub.Get({"name"})->value<std::string>(), "n");
  EXPECT_EQ(sub.Where({"name"}).ToString(), "p.toml:2:8");
  EXPECT_EQ(sub.Where({"link_types", "fast", "bandwidth_gb_per_s"}).ToString(), "p.toml:4:31");
  EXPECT_EQ(sub.file(), "p.toml");
}

TEST(ConfigDocTest, EraseRemovesAKey) {
  auto doc = ConfigDoc::ParseString("[a]\nb = 1\nc = 2\n", "e.toml");
  ASSERT_TRUE(doc.ok());
  doc->Erase({"a", "b"});
  EXPECT_EQ(doc->Get({"a", "b"}), nullptr);
  EXPECT_NE(doc->Get({"a", "c"}), nullptr);
  doc->Erase({"missing", "x"});  // no effect, no crash
}

TEST(KeyPathTest, ParseAndPrintRoundTrip) {
  auto p = ParsePath("sweep.\"model.preset\"");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0], "sweep");
  EXPECT_EQ((*p)[1], "model.preset");
  EXPECT_EQ(PathToString(*p), "sweep.\"model.preset\"");
  EXPECT_EQ(PathToString({"train", "micro_batch"}), "train.micro_batch");
}

TEST(KeyPathTest, BadPathsAreRefused) {
  EXPECT_FALSE(ParsePath("a..b").ok());
  EXPECT_FALSE(ParsePath(".a").ok());
  EXPECT_FALSE(ParsePath("a.").ok());
  EXPECT_FALSE(ParsePath("a.\"b").ok());
  EXPECT_FALSE(ParsePath("").ok());
}

}  // namespace
}  // namespace testbed
