// Experiment expansion: the cartesian product of the sweep (in file order, first key
// outermost), arms (each overriding the file and the sweep), --set (overriding everything,
// pinning a swept key, or one arm with arm.<name>.<key>), run ids and structural errors.
#include "config/experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace testbed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;

class ExperimentTest : public ::testing::Test {
 protected:
  absl::StatusOr<Experiment> Load(const std::string& text, const std::vector<std::string>& sets = {}) {
    file_ = dir_ / "exp.toml";
    testing::WriteFile(file_, text);
    return Experiment::Load(file_, sets);
  }
  std::string F() const { return file_.string(); }

  static std::int64_t Int(const RunSpec& run, const KeyPath& path) {
    const toml::node* n = run.doc.Get(path);
    return n ? n->value<std::int64_t>().value_or(-1) : -999;
  }
  static std::string Str(const RunSpec& run, const KeyPath& path) {
    const toml::node* n = run.doc.Get(path);
    return n ? n->value<std::string>().value_or("?") : "(absent)";
  }

  testing::TempDir dir_;
  std::filesystem::path file_;
};

constexpr const char* kHeader = "[experiment]\nname = \"e\"\nbackend = \"plan\"\n";

TEST_F(ExperimentTest, SweepIsCartesianInFileOrderThenArms) {
  // "train.micro_batch" sorts after "model.preset" but comes first in the file: it must be
  // the outer dimension.
  auto ex = Load(std::string(kHeader) +
                 "[sweep]\n"
                 "\"train.micro_batch\" = [1, 2]\n"
                 "\"model.preset\" = [\"a\", \"b\", \"c\"]\n"
                 "[[arm]]\nname = \"base\"\n"
                 "[[arm]]\nname = \"fast\"\n");
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_THAT(ex->sweep_keys(), ElementsAre("train.micro_batch", "model.preset"));
  EXPECT_THAT(ex->points(), ElementsAre("1,a", "1,b", "1,c", "2,a", "2,b", "2,c"));
  ASSERT_EQ(ex->runs().size(), 12u);
  std::vector<std::string> ids;
  for (const RunSpec& r : ex->runs()) ids.push_back(r.id);
  EXPECT_THAT(ids, ElementsAre("base@1,a", "fast@1,a", "base@1,b", "fast@1,b", "base@1,c", "fast@1,c", "base@2,a",
                               "fast@2,a", "base@2,b", "fast@2,b", "base@2,c", "fast@2,c"));
  for (size_t i = 0; i < ex->runs().size(); ++i) {
    const RunSpec& r = ex->runs()[i];
    EXPECT_EQ(r.index, static_cast<int>(i));
    EXPECT_EQ(r.arm_index, static_cast<int>(i % 2));
    EXPECT_EQ(r.point_index, static_cast<int>(i / 2));
    EXPECT_EQ(Int(r, {"train", "micro_batch"}), i < 6 ? 1 : 2);
    EXPECT_EQ(Str(r, {"model", "preset"}), std::string(1, static_cast<char>('a' + (i / 2) % 3)));
    // The structural sections are not part of a run's configuration.
    EXPECT_EQ(r.doc.Get({"sweep"}), nullptr);
    EXPECT_EQ(r.doc.Get({"arm"}), nullptr);
  }
  EXPECT_THAT(ex->runs()[3].point_values, ElementsAre(Pair("train.micro_batch", "1"), Pair("model.preset", "b")));
}

TEST_F(ExperimentTest, WithoutSweepTheRunIdIsTheArmName) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"only\"\ndoc = \"the one\"\n");
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->runs().size(), 1u);
  EXPECT_EQ(ex->runs()[0].id, "only");
  EXPECT_EQ(ex->runs()[0].point, "");
  EXPECT_EQ(ex->arms()[0].doc, "the one");
  EXPECT_THAT(ex->points(), ElementsAre(""));
}

TEST_F(ExperimentTest, ADocThatIsNotAStringIsRefusedAtItsKey) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\ndoc = 5\n[[point]]\nname = \"p\"\ndoc = [\"x\"]\n");
  ASSERT_FALSE(ex.ok());
  const std::string message(ex.status().message());
  EXPECT_THAT(message, HasSubstr("[[arm]] 'a': 'doc' must be a string, got a number"));
  EXPECT_THAT(message, HasSubstr("'doc' must be a string, got an array"));
  EXPECT_THAT(message, HasSubstr(file_.string() + ":"));
}

TEST_F(ExperimentTest, DottedKeysAnArmOrPointCannotSetAreRefused) {
  auto ex = Load(std::string(kHeader) +
                 "[[arm]]\nname = \"a\"\n\"sweep.x\" = 3\n\"experiment.output\" = \"o.h5\"\n\"experiment.seed\" = 7\n"
                 "[[point]]\nname = \"p\"\n\"reference.a\" = 2\n");
  ASSERT_FALSE(ex.ok());
  const std::string message(ex.status().message());
  EXPECT_THAT(message, HasSubstr("[[arm]] 'a': 'sweep.x' cannot be set here: [sweep] belongs to the experiment file"));
  EXPECT_THAT(message, HasSubstr("'experiment.output' cannot be set here: [experiment] is the same for every run"));
  EXPECT_THAT(message, HasSubstr("[[point]] 'p': 'reference.a' cannot be set here"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("'experiment.seed' cannot")));
  EXPECT_THAT(message, HasSubstr(F() + ":"));
}

TEST_F(ExperimentTest, AnArmThatWouldReplaceASweptParameterIsRefused) {
  // The sweep sets load_balancer.skew; an arm naming the component by a string (or a table)
  // would replace it, so each of its runs would silently take the default.
  const std::string sweep = "[sweep]\n\"load_balancer.skew\" = [1.0, 2.0]\n";
  auto ex = Load(std::string(kHeader) + sweep + "[[arm]]\nname = \"a\"\nload_balancer = \"pro_prophet\"\n");
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(ex.status().message(),
              HasSubstr("[[arm]] 'a' sets load_balancer, which would replace the [sweep] value of 'load_balancer.skew'"));
  EXPECT_THAT(ex.status().message(), HasSubstr(F() + ":8:"));
  // Naming only the component keeps the swept parameter.
  auto ok = Load(std::string(kHeader) + sweep + "[[arm]]\nname = \"a\"\n\"load_balancer.use\" = \"pro_prophet\"\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->runs().size(), 2u);
  EXPECT_EQ(Str(ok->runs()[1], {"load_balancer", "use"}), "pro_prophet");
}

TEST_F(ExperimentTest, SlashesInSweepValuesBecomeUnderscoresInRunIds) {
  auto ex = Load(std::string(kHeader) + "[sweep]\n\"model.preset\" = [\"x/y\"]\n[[arm]]\nname = \"a\"\n");
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(ex->runs()[0].id, "a@x_y");
  EXPECT_EQ(ex->runs()[0].point, "x/y");
}

TEST_F(ExperimentTest, RunIdsThatCollideAreRefused) {
  auto ex = Load(std::string(kHeader) + "[sweep]\n\"model.preset\" = [\"x/y\", \"x_y\"]\n[[arm]]\nname = \"a\"\n");
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(std::string(ex.status().message()), HasSubstr("'a@x_y'"));
}

TEST_F(ExperimentTest, PrecedenceFileThenSweepThenArmThenSet) {
  const std::string text = std::string(kHeader) +
                           "[train]\nmicro_batch = 1\nsteps = 3\nglobal_batch = 64\n"
                           "[sweep]\n\"train.steps\" = [5, 6]\n"
                           "[[arm]]\nname = \"plain\"\n"
                           "[[arm]]\nname = \"armed\"\n"
                           "train = { micro_batch = 8, steps = 9 }\n"
                           "\"parallel.pp\" = 2\n"
                           "partitioner = { use = \"merak\", stages = 4 }\n";
  auto ex = Load(text);
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->runs().size(), 4u);
  const RunSpec& plain5 = ex->runs()[0];
  const RunSpec& armed5 = ex->runs()[1];
  EXPECT_EQ(plain5.id, "plain@5");
  EXPECT_EQ(Int(plain5, {"train", "micro_batch"}), 1);   // the file
  EXPECT_EQ(Int(plain5, {"train", "steps"}), 5);         // the sweep beats the file
  EXPECT_EQ(Int(plain5, {"train", "global_batch"}), 64);
  EXPECT_EQ(plain5.doc.Get({"parallel"}), nullptr);
  EXPECT_EQ(Int(armed5, {"train", "micro_batch"}), 8);   // the arm beats the file
  EXPECT_EQ(Int(armed5, {"train", "steps"}), 9);         // ... and the sweep
  EXPECT_EQ(Int(armed5, {"train", "global_batch"}), 64); // untouched keys stay
  EXPECT_EQ(Int(armed5, {"parallel", "pp"}), 2);
  EXPECT_EQ(Str(armed5, {"partitioner", "use"}), "merak");
  EXPECT_EQ(Int(armed5, {"partitioner", "stages"}), 4);
  // Positions point at the line that set the value: the arm's table is on line 14.
  EXPECT_EQ(armed5.doc.Where({"train", "micro_batch"}).line, 14);
  EXPECT_EQ(plain5.doc.Where({"train", "steps"}).line, 9);  // the sweep array

  auto with_set = Load(text, {"train.micro_batch=16", "train.steps=7", "parallel.pp=4"});
  ASSERT_TRUE(with_set.ok()) << with_set.status();
  // --set on the swept key pins it: that dimension collapses to its one value.
  EXPECT_TRUE(with_set->sweep_keys().empty());
  ASSERT_EQ(with_set->runs().size(), 2u);
  for (const RunSpec& r : with_set->runs()) {
    EXPECT_EQ(r.id, r.arm);
    EXPECT_EQ(Int(r, {"train", "micro_batch"}), 16);
    EXPECT_EQ(Int(r, {"train", "steps"}), 7);
    EXPECT_EQ(Int(r, {"parallel", "pp"}), 4);
    EXPECT_EQ(r.doc.Where({"train", "micro_batch"}).file, "--set train.micro_batch=16");
  }
}

TEST_F(ExperimentTest, SetOfOneArmTouchesOnlyThatArm) {
  const std::string text = std::string(kHeader) +
                           "[train]\nmicro_batch = 1\n"
                           "[[arm]]\nname = \"a\"\npartitioner = \"merak\"\n"
                           "[[arm]]\nname = \"b\"\npartitioner = \"merak\"\n";
  auto ex = Load(text, {"arm.b.train.micro_batch=4", "arm.b.partitioner.stages=2"});
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->runs().size(), 2u);
  EXPECT_EQ(Int(ex->runs()[0], {"train", "micro_batch"}), 1);
  EXPECT_EQ(Str(ex->runs()[0], {"partitioner"}), "merak");
  EXPECT_EQ(Int(ex->runs()[1], {"train", "micro_batch"}), 4);
  // The shorthand "merak" became { use = "merak", stages = 2 }.
  EXPECT_EQ(Str(ex->runs()[1], {"partitioner", "use"}), "merak");
  EXPECT_EQ(Int(ex->runs()[1], {"partitioner", "stages"}), 2);
  EXPECT_EQ(ex->runs()[1].doc.Where({"partitioner", "stages"}).file, "--set arm.b.partitioner.stages=2");
}

TEST_F(ExperimentTest, SetOfAWholeSectionMergesKeyByKeyAsAnArmDoes) {
  auto ex = Load(std::string(kHeader) + "[train]\nmicro_batch = 2\nsteps = 3\n[[arm]]\nname = \"a\"\n"
                                        "train = { steps = 4 }\n[[arm]]\nname = \"b\"\n",
                 {"train={ steps = 5, learning_rate = 0.5 }"});
  ASSERT_TRUE(ex.ok()) << ex.status();
  for (const RunSpec& run : ex->runs()) {
    EXPECT_EQ(Int(run, {"train", "micro_batch"}), 2) << run.arm;  // kept, not replaced
    EXPECT_EQ(Int(run, {"train", "steps"}), 5) << run.arm;         // the --set comes last
    EXPECT_EQ(run.doc.Get({"train", "learning_rate"})->value<double>().value_or(0), 0.5);
  }
}

TEST_F(ExperimentTest, SetOfAnUnknownArmIsRefused) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\n", {"arm.zz.train.micro_batch=4"});
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(std::string(ex.status().message()), HasSubstr("no arm named 'zz'"));
}

TEST_F(ExperimentTest, SetValuesAreTomlOrBareStrings) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\n",
                 {"model.preset=gpt-2.5b", "train.precision=\"bf16\"", "parallel.sequence_parallel=true",
                  "x.list=[1, 2]"});
  ASSERT_TRUE(ex.ok()) << ex.status();
  const RunSpec& r = ex->runs()[0];
  EXPECT_EQ(Str(r, {"model", "preset"}), "gpt-2.5b");
  EXPECT_EQ(Str(r, {"train", "precision"}), "bf16");
  EXPECT_EQ(r.doc.Get({"parallel", "sequence_parallel"})->value<bool>(), true);
  EXPECT_EQ(r.doc.Get({"x", "list"})->as_array()->size(), 2u);
}

TEST_F(ExperimentTest, MalformedSetIsRefused) {
  for (const char* bad : {"novalue", "=3", "a..b=1"}) {
    auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\n", {bad});
    EXPECT_FALSE(ex.ok()) << bad;
  }
}

TEST_F(ExperimentTest, SetOfExperimentKeysEditsTheFile) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\n", {"experiment.seed=9"});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(ex->doc().Get({"experiment", "seed"})->value<std::int64_t>(), 9);
  EXPECT_EQ(Int(ex->runs()[0], {"experiment", "seed"}), 9);
}

TEST_F(ExperimentTest, SetOfTheSweepReplacesItsValues) {
  auto ex = Load(std::string(kHeader) + "[sweep]\n\"train.steps\" = [1, 2]\n[[arm]]\nname = \"a\"\n",
                 {"sweep.\"train.steps\"=[7, 8, 9]"});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_THAT(ex->points(), ElementsAre("7", "8", "9"));
  ASSERT_EQ(ex->runs().size(), 3u);
  EXPECT_EQ(Int(ex->runs()[2], {"train", "steps"}), 9);
}

TEST_F(ExperimentTest, DuplicateArmNamesAreRefusedWithPosition) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\n[[arm]]\nname = \"a\"\n");
  ASSERT_FALSE(ex.ok());
  const std::string msg(ex.status().message());
  EXPECT_THAT(msg, StartsWith(F() + ":6:"));
  EXPECT_THAT(msg, HasSubstr("name 'a' is used twice"));
}

TEST_F(ExperimentTest, ArmWithoutValidNameIsRefused) {
  for (const char* arm : {"doc = \"x\"\n", "name = \"a/b\"\n", "name = 3\n"}) {
    auto ex = Load(std::string(kHeader) + "[[arm]]\n" + arm);
    ASSERT_FALSE(ex.ok()) << arm;
    EXPECT_THAT(std::string(ex.status().message()), HasSubstr("needs name"));
  }
}

TEST_F(ExperimentTest, NoArmIsRefused) {
  auto ex = Load(kHeader);
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(std::string(ex.status().message()), HasSubstr("at least one arm"));
}

TEST_F(ExperimentTest, UnknownArmKeyIsRefusedWithPosition) {
  auto ex = Load(std::string(kHeader) + "[[arm]]\nname = \"a\"\nbogus = 3\n");
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(std::string(ex.status().message()), StartsWith(F() + ":6:9: [[arm]] 'a': unknown key 'bogus'"));
}

TEST_F(ExperimentTest, SweepMustBeNonEmptyArrays) {
  auto ex = Load(std::string(kHeader) + "[sweep]\n\"train.steps\" = 3\n\"train.micro_batch\" = []\n[[arm]]\nname = \"a\"\n");
  ASSERT_FALSE(ex.ok());
  const std::string msg(ex.status().message());
  EXPECT_THAT(msg, HasSubstr(F() + ":5:17: [sweep] 'train.steps': expected a non-empty array"));
  EXPECT_THAT(msg, HasSubstr(F() + ":6:23: [sweep] 'train.micro_batch': expected a non-empty array"));
}

TEST_F(ExperimentTest, ReferencesToArmsAndPoints) {
  const std::string sweep = "[sweep]\n\"model.preset\" = [\"p1\", \"p2\"]\n[[arm]]\nname = \"base\"\n[[arm]]\nname = \"new\"\n";
  auto ok = Load(std::string(kHeader) + sweep + "[reference]\n\"new/p2\" = 1.5\n\"new\" = 2\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->references().size(), 2u);
  bool seen_exact = false, seen_wide = false;
  for (const Reference& r : ok->references()) {
    if (r.point == "p2") {
      seen_exact = true;
      EXPECT_EQ(r.arm, "new");
      EXPECT_EQ(r.value, 1.5);
    } else {
      seen_wide = true;
      EXPECT_EQ(r.point, "");
      EXPECT_EQ(r.value, 2.0);
    }
  }
  EXPECT_TRUE(seen_exact && seen_wide);

  auto bad_arm = Load(std::string(kHeader) + sweep + "[reference]\n\"old/p1\" = 1.5\n");
  ASSERT_FALSE(bad_arm.ok());
  EXPECT_THAT(std::string(bad_arm.status().message()),
              StartsWith(F() + ":11:12: [reference] 'old/p1': no arm named 'old'"));

  auto bad_point = Load(std::string(kHeader) + sweep + "[reference]\n\"new/p9\" = 1.5\n");
  ASSERT_FALSE(bad_point.ok());
  EXPECT_THAT(std::string(bad_point.status().message()),
              StartsWith(F() + ":11:12: [reference] 'new/p9': no sweep point 'p9'; points are: p1, p2"));

  auto not_number = Load(std::string(kHeader) + sweep + "[reference]\n\"new/p1\" = \"fast\"\n");
  ASSERT_FALSE(not_number.ok());
  EXPECT_THAT(std::string(not_number.status().message()), HasSubstr("expected a number"));
}

TEST_F(ExperimentTest, SyntaxErrorOfTheFileHasItsPosition) {
  auto ex = Load("[experiment]\nname = \"e\"\nbackend = plan\n");
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(std::string(ex.status().message()), StartsWith(F() + ":3:11: TOML syntax error"));
}

TEST_F(ExperimentTest, SourceTextAndSetsAreKept) {
  const std::string text = std::string(kHeader) + "[[arm]]\nname = \"a\"\n";
  auto ex = Load(text, {"train.steps=2"});
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->source_text(), text);
  EXPECT_THAT(ex->sets(), ElementsAre("train.steps=2"));
}

TEST(StableHashTest, IsFnv1a) {
  // FNV-1a 64 of "" is the offset basis; of "a" is 0xaf63dc4c8601ec8c (published test vector).
  EXPECT_EQ(StableHash(""), 14695981039346656037ull);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(StableHash("a", 1), StableHash("a", 2));
}

}  // namespace
}  // namespace testbed
