// ResolveParams / ConvertValue: validation of TOML tables against parameter declarations.
// Every error names file:line:column, the key, its owner and what was expected.
#include "config/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<ParamSpec> Specs() {
  return {
      ParamSpec::Int("stages", 4).Range(1, 64).Unit("stages").Doc("pipeline depth"),
      ParamSpec::Double("ratio", 0.5).Range(0, 1).Doc("a fraction"),
      ParamSpec::Bool("overlap", false).Doc("overlap or not"),
      ParamSpec::Choice("recompute", "none", {"none", "full", "selective"}),
      ParamSpec::IntList("sizes", {1, 2}).Min(1),
      ParamSpec::DoubleList("weights", {}),
      ParamSpec::StringList("names", {}),
      ParamSpec::String("label", "x"),
  };
}

std::vector<std::string> Lines(const ErrorList& errors) {
  absl::Status st = errors.ToStatus();
  if (st.ok()) return {};
  return absl::StrSplit(std::string(st.message()), '\n');
}

TEST(SchemaTest, ValidTableResolvesWithDefaultsFilledIn) {
  auto doc = ConfigDoc::ParseString(
      "[partitioner]\nuse = \"p\"\nstages = 8\nratio = 1\nsizes = [3, 4]\nnames = [\"a\", \"b\"]\n", "f.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  ParamSet p = ResolveParams(*doc, {"partitioner"}, Specs(), "partitioner 'p'", {"use"}, errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(p.Get<std::int64_t>("stages").value(), 8);
  EXPECT_EQ(p.Get<double>("ratio").value(), 1.0);  // an integer is accepted for a float
  EXPECT_EQ(p.Get<bool>("overlap").value(), false);
  EXPECT_EQ(p.Get<std::string>("recompute").value(), "none");
  EXPECT_EQ(p.Get<std::vector<std::int64_t>>("sizes").value(), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(p.Get<std::vector<std::string>>("names").value(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(p.Get<std::vector<double>>("weights").value().empty());
  EXPECT_EQ(p.Get<std::string>("label").value(), "x");
  EXPECT_FALSE(p.Has("use"));
  EXPECT_EQ(p.values().size(), Specs().size());
}

TEST(SchemaTest, UnknownKeySuggestsTheNearestName) {
  auto doc = ConfigDoc::ParseString("[partitioner]\nuse = \"p\"\nstagse = 4\n", "f.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"partitioner"}, Specs(), "partitioner 'p'", {"use"}, errors);
  ASSERT_EQ(errors.size(), 1u);
  const std::string msg = Lines(errors)[0];
  EXPECT_THAT(msg, StartsWith("f.toml:3:10: partitioner 'p': unknown key 'stagse'"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'stages'?"));
  EXPECT_THAT(msg, HasSubstr("expected one of: stages, ratio, overlap, recompute, sizes, weights, names, label, use"));
}

TEST(SchemaTest, AComponentKindAfterATableHeaderIsToldToMoveUp) {
  // TOML puts `collective = ...` written after [experiment] into [experiment].
  auto doc = ConfigDoc::ParseString("[experiment]\nname = \"x\"\ncollective = \"ring\"\n", "f.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"experiment"}, {ParamSpec::String("name", "")}, "[experiment]", {}, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(Lines(errors)[0], HasSubstr("f.toml:3:14: [experiment]: unknown key 'collective'"));
  EXPECT_THAT(Lines(errors)[0], HasSubstr("'collective' is a component kind, a key of the file's top level: TOML puts a "
                                          "key after [experiment] into that table, so move it above the first [table]"));
}

TEST(SchemaTest, UnknownKeyFarFromEveryNameHasNoSuggestion) {
  auto doc = ConfigDoc::ParseString("[t]\nzzzzzzzz = 1\n", "f.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"t"}, Specs(), "[t]", {}, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(Lines(errors)[0], StartsWith("f.toml:2:12: [t]: unknown key 'zzzzzzzz'"));
  EXPECT_THAT(Lines(errors)[0], Not(HasSubstr("did you mean")));
}

TEST(SchemaTest, EveryProblemOfATableIsReportedWithItsPosition) {
  const std::string text =
      "[partitioner]\n"
      "use = \"p\"\n"
      "stages = 0\n"             // line 3: out of range (value at column 10)
      "ratio = \"half\"\n"       // line 4: wrong type (column 9)
      "overlap = 1\n"            // line 5: an int is not a bool (column 11)
      "recompute = \"some\"\n"   // line 6: not one of the choices (column 13)
      "sizes = [1, 0]\n"         // line 7: an element out of range (column 9)
      "label = 3.5\n";           // line 8: not a string (column 9)
  auto doc = ConfigDoc::ParseString(text, "bad.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"partitioner"}, Specs(), "partitioner 'p'", {"use"}, errors);
  const std::vector<std::string> lines = Lines(errors);
  ASSERT_EQ(lines.size(), 6u) << errors.ToStatus();
  auto find = [&](const std::string& prefix) -> std::string {
    for (const auto& l : lines) {
      if (l.rfind(prefix, 0) == 0) return l;
    }
    return "(no error starting with " + prefix + ")";
  };
  const std::string stages = find("bad.toml:3:10: partitioner 'p': 'stages': ");
  EXPECT_THAT(stages, HasSubstr("expected int in [1"));
  EXPECT_THAT(stages, HasSubstr("64"));
  EXPECT_THAT(stages, HasSubstr("(stages)"));
  EXPECT_THAT(stages, HasSubstr("got 0"));
  EXPECT_THAT(find("bad.toml:4:9: partitioner 'p': 'ratio': "), HasSubstr("expected float in [0"));
  EXPECT_THAT(find("bad.toml:4:9: partitioner 'p': 'ratio': "), HasSubstr("got \"half\""));
  EXPECT_THAT(find("bad.toml:5:11: partitioner 'p': 'overlap': "), HasSubstr("expected bool, got 1"));
  EXPECT_THAT(find("bad.toml:6:13: partitioner 'p': 'recompute': "),
              HasSubstr("expected string, one of {none, full, selective}, got \"some\""));
  EXPECT_THAT(find("bad.toml:7:9: partitioner 'p': 'sizes': "), HasSubstr("expected list of int >= 1"));
  EXPECT_THAT(find("bad.toml:8:9: partitioner 'p': 'label': "), HasSubstr("expected string, got 3.5"));
}

TEST(SchemaTest, MissingRequiredKeyNamesTheTableAndWhatIsExpected) {
  std::vector<ParamSpec> specs = {ParamSpec::Int("budget", 0).Min(1).Unit("GiB").Required().Doc("memory")};
  auto doc = ConfigDoc::ParseString("x = 1\n\n[mem]\nother = 2\n", "m.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"mem"}, specs, "[mem]", {"other"}, errors);
  ASSERT_EQ(errors.size(), 1u);
  const std::string msg = Lines(errors)[0];
  EXPECT_THAT(msg, StartsWith("m.toml:3:"));
  EXPECT_THAT(msg, HasSubstr("[mem]: missing required key 'budget' (int >= 1"));
  EXPECT_THAT(msg, HasSubstr("(GiB)"));
}

TEST(SchemaTest, RequiredKeyOfAnAbsentTableIsMissing) {
  std::vector<ParamSpec> specs = {ParamSpec::Int("layers", 0).Min(1).Required()};
  auto doc = ConfigDoc::ParseString("a = 1\n", "m.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"model"}, specs, "[model]", {}, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(Lines(errors)[0], HasSubstr("[model]: missing required key 'layers'"));
}

TEST(SchemaTest, AbsentTableGivesAllDefaults) {
  auto doc = ConfigDoc::ParseString("a = 1\n", "d.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  ParamSet p = ResolveParams(*doc, {"none"}, Specs(), "x", {}, errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(p.Get<std::int64_t>("stages").value(), 4);
  EXPECT_EQ(p.Get<std::vector<std::int64_t>>("sizes").value(), (std::vector<std::int64_t>{1, 2}));
}

TEST(SchemaTest, NonTableIsRefused) {
  auto doc = ConfigDoc::ParseString("\ntrain = 5\n", "n.toml");
  ASSERT_TRUE(doc.ok());
  ErrorList errors;
  (void)ResolveParams(*doc, {"train"}, Specs(), "[train]", {}, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(Lines(errors)[0], StartsWith("n.toml:2:9: [train]: expected a table"));
}

TEST(SchemaTest, ConvertValueRefusesNonFiniteAndFractionalInts) {
  auto doc = ConfigDoc::ParseString("a = inf\nb = nan\nc = 2.5\nd = 3\ne = [1.5, 2]\nf = [true]\n", "c.toml");
  ASSERT_TRUE(doc.ok());
  const ParamSpec dbl = ParamSpec::Double("x", 0);
  EXPECT_FALSE(ConvertValue(*doc->Get({"a"}), dbl).ok());
  EXPECT_FALSE(ConvertValue(*doc->Get({"b"}), dbl).ok());
  EXPECT_EQ(std::get<double>(ConvertValue(*doc->Get({"c"}), dbl).value()), 2.5);
  EXPECT_EQ(std::get<double>(ConvertValue(*doc->Get({"d"}), dbl).value()), 3.0);
  EXPECT_FALSE(ConvertValue(*doc->Get({"c"}), ParamSpec::Int("x", 0)).ok());
  auto list = ConvertValue(*doc->Get({"e"}), ParamSpec::DoubleList("x", {}));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(std::get<std::vector<double>>(*list), (std::vector<double>{1.5, 2.0}));
  EXPECT_FALSE(ConvertValue(*doc->Get({"e"}), ParamSpec::IntList("x", {})).ok());
  EXPECT_FALSE(ConvertValue(*doc->Get({"f"}), ParamSpec::StringList("x", {})).ok());
  EXPECT_FALSE(ConvertValue(*doc->Get({"d"}), ParamSpec::IntList("x", {})).ok());
}

TEST(SchemaTest, DidYouMean) {
  EXPECT_EQ(DidYouMean("micro_bach", {"global_batch", "micro_batch", "steps"}), "micro_batch");
  EXPECT_EQ(DidYouMean("tp", {"tp", "pp"}), "tp");
  EXPECT_EQ(DidYouMean("completely_different", {"tp", "pp"}), "");
}

TEST(SchemaTest, ErrorListJoinsMessagesOneLineEach) {
  ErrorList errors;
  EXPECT_TRUE(errors.ToStatus().ok());
  errors.Add(SourceLoc{"a.toml", 1, 2}, "first");
  errors.Add("second");
  errors.Add(absl::OkStatus());
  errors.Add(absl::NotFoundError("third"));
  EXPECT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors.ToStatus().message(), "a.toml:1:2: first\nsecond\nthird");
  EXPECT_EQ(errors.ToStatus().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParamSpecTest, DescribeExpectedAndFormatValue) {
  EXPECT_EQ(ParamSpec::Choice("r", "a", {"a", "b"}).DescribeExpected(), "string, one of {a, b}");
  EXPECT_EQ(ParamSpec::Double("x", 0).Min(0).Unit("s").DescribeExpected(), "float >= 0.0 (s)");
  EXPECT_EQ(FormatParamValue(ParamValue(std::int64_t{4})), "4");
  EXPECT_EQ(FormatParamValue(ParamValue(0.5)), "0.5");
  EXPECT_EQ(FormatParamValue(ParamValue(std::string("m"))), "\"m\"");
  EXPECT_EQ(FormatParamValue(ParamValue(std::vector<std::int64_t>{1, 2})), "[1, 2]");
  EXPECT_EQ(FormatParamValue(ParamValue(std::vector<std::string>{"a"})), "[\"a\"]");
  EXPECT_EQ(FormatParamValue(ParamValue(true)), "true");
}

}  // namespace
}  // namespace testbed
