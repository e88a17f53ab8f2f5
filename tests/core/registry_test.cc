// Registry: declarations are checked when added, names are unique per kind, creation turns
// errors and exceptions into error values naming the component, and a plugin's components
// can be rolled back.
#include "testbed/registry.h"

#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testbed/partitioner.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

class Dummy : public Component {
 public:
  explicit Dummy(int v) : value(v) {}
  int value;
};

ComponentFactory Make(int v) {
  return [v](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Component>> { return std::make_unique<Dummy>(v); };
}

ComponentDecl Decl(ComponentKind kind, std::string name, std::vector<ParamSpec> params = {}) {
  return ComponentDecl{kind, std::move(name), "doc", std::move(params)};
}

TEST(RegistryTest, DuplicateNameOfOneKindIsRefused) {
  Registry r;
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kScheduler, "1f1b"), Make(1)).ok());
  absl::Status st = r.AddEntry(Decl(ComponentKind::kScheduler, "1f1b"), Make(2));
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(st.message()), HasSubstr("scheduler '1f1b' is already registered by plugin 'core'"));
  // The first registration is untouched.
  auto made = r.CreateEntry(ComponentKind::kScheduler, "1f1b", {});
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(static_cast<Dummy*>(made->get())->value, 1);
  // The same name under another kind is a different component.
  EXPECT_TRUE(r.AddEntry(Decl(ComponentKind::kCollective, "1f1b"), Make(3)).ok());
}

TEST(RegistryTest, DuplicateNameNamesTheOtherPluginAndItsFile) {
  Registry r;
  r.BeginPlugin("first", "/somewhere/first.so", nullptr);
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "p"), Make(1)).ok());
  r.CommitPlugin();
  r.BeginPlugin("second", "/elsewhere/second.so", nullptr);
  absl::Status st = r.AddEntry(Decl(ComponentKind::kPartitioner, "p"), Make(2));
  r.RollbackPlugin();
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("partitioner 'p' is already registered by plugin 'first' (/somewhere/first.so)"));
  ASSERT_NE(r.Find(ComponentKind::kPartitioner, "p"), nullptr);
  EXPECT_EQ(r.Find(ComponentKind::kPartitioner, "p")->plugin, "first");
}

TEST(RegistryTest, BadDeclarationsAreRefused) {
  struct Case {
    ComponentDecl decl;
    std::string expect;
  };
  std::vector<Case> cases = {
      {Decl(ComponentKind::kPartitioner, ""), "empty name"},
      {Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Int("use", 1)}), "reserved or empty name"},
      {Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Int("", 1)}), "reserved or empty name"},
      {Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Int("a", 1), ParamSpec::Double("a", 1)}), "declared twice"},
      {Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Int("a", 0).Range(1, 4)}), "default outside its range"},
      {Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Double("a", 5.5).Min(6)}), "default outside its range"},
      {Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Choice("a", "z", {"x", "y"})}),
       "default \"z\" is not one of its choices"},
  };
  for (const Case& c : cases) {
    Registry r;
    absl::Status st = r.AddEntry(c.decl, Make(1));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.expect));
    EXPECT_TRUE(r.ListAll().empty());
  }
  Registry r;
  EXPECT_FALSE(r.AddEntry(Decl(ComponentKind::kPartitioner, "nofactory"), nullptr).ok());
  EXPECT_EQ(r.Find(ComponentKind::kPartitioner, "nofactory"), nullptr);
  // A required parameter's default is only shown, so it need not satisfy the range.
  EXPECT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "req", {ParamSpec::Int("n", 0).Min(1).Required()}),
                         Make(1)).ok());
}

TEST(RegistryTest, ListIsSortedByNameAndKind) {
  Registry r;
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kScheduler, "zeta"), Make(1)).ok());
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kScheduler, "alpha"), Make(1)).ok());
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "mid"), Make(1)).ok());
  auto list = r.List(ComponentKind::kScheduler);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]->decl.name, "alpha");
  EXPECT_EQ(list[1]->decl.name, "zeta");
  EXPECT_EQ(r.NamesOf(ComponentKind::kScheduler), "alpha, zeta");
  EXPECT_EQ(r.NamesOf(ComponentKind::kCompressor), "(none loaded)");
  auto all = r.ListAll();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->decl.name, "mid");  // partitioners come first (kind order)
}

TEST(RegistryTest, CreateUnknownListsTheAvailable) {
  Registry r;
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kScheduler, "gpipe"), Make(1)).ok());
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kScheduler, "1f1b"), Make(1)).ok());
  auto made = r.CreateEntry(ComponentKind::kScheduler, "pipedream", {});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("unknown scheduler 'pipedream'; available: 1f1b, gpipe"));
}

TEST(RegistryTest, CreateWrapsThrownExceptions) {
  Registry r;
  r.BeginPlugin("thrower", "/x/thrower.so", nullptr);
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kCompressor, "std"),
                         [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Component>> {
                           throw std::runtime_error("bad alloc of hopes");
                         }).ok());
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kCompressor, "int"),
                         [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Component>> { throw 42; }).ok());
  r.CommitPlugin();
  auto a = r.CreateEntry(ComponentKind::kCompressor, "std", {});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("compressor 'std' (plugin thrower) threw while being created: bad alloc of hopes"));
  auto b = r.CreateEntry(ComponentKind::kCompressor, "int", {});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("compressor 'int' (plugin thrower) threw a non-standard"));
}

TEST(RegistryTest, CreatePrefixesFactoryErrorsAndRefusesNull) {
  Registry r;
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kTpPlanner, "err"),
                         [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Component>> {
                           return absl::ResourceExhaustedError("no memory for you");
                         }).ok());
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kTpPlanner, "null"),
                         [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Component>> {
                           return std::unique_ptr<Component>();
                         }).ok());
  auto e = r.CreateEntry(ComponentKind::kTpPlanner, "err", {});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(e.status().message(), "tp_planner 'err' (plugin core): no memory for you");
  auto n = r.CreateEntry(ComponentKind::kTpPlanner, "null", {});
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("returned no object"));
}

TEST(RegistryTest, FactoryReceivesTheParams) {
  Registry r;
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "p", {ParamSpec::Int("n", 1)}),
                         [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Component>> {
                           auto n = p.Get<std::int64_t>("n");
                           if (!n.ok()) return n.status();
                           return std::make_unique<Dummy>(static_cast<int>(*n));
                         }).ok());
  ParamSet params;
  params.Set("n", std::int64_t{17});
  auto made = r.CreateEntry(ComponentKind::kPartitioner, "p", params);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(static_cast<Dummy*>(made->get())->value, 17);
  ParamSet wrong;
  wrong.Set("n", std::string("x"));
  EXPECT_FALSE(r.CreateEntry(ComponentKind::kPartitioner, "p", wrong).ok());
}

TEST(RegistryTest, RollbackRemovesOnlyThePendingPlugin) {
  Registry r;
  r.BeginPlugin("keep", "/k.so", nullptr);
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "kept"), Make(1)).ok());
  r.CommitPlugin();
  r.BeginPlugin("drop", "/d.so", nullptr);
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "dropped"), Make(2)).ok());
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kDeviceModel, "dropped_too"), Make(3)).ok());
  r.RollbackPlugin();
  EXPECT_NE(r.Find(ComponentKind::kPartitioner, "kept"), nullptr);
  EXPECT_EQ(r.Find(ComponentKind::kPartitioner, "dropped"), nullptr);
  EXPECT_EQ(r.Find(ComponentKind::kDeviceModel, "dropped_too"), nullptr);
  EXPECT_EQ(r.ListAll().size(), 1u);
  // After a rollback, new entries belong to the core again.
  ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kScheduler, "after"), Make(4)).ok());
  EXPECT_EQ(r.Find(ComponentKind::kScheduler, "after")->plugin, "core");
  EXPECT_EQ(r.Find(ComponentKind::kScheduler, "after")->library_path, "");
}

TEST(RegistryTest, InstancesKeepTheirLibraryAliveAfterTheRegistryIsGone) {
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  std::shared_ptr<Component> instance;
  {
    Registry r;
    r.BeginPlugin("lib", "/lib.so", token);
    ASSERT_TRUE(r.AddEntry(Decl(ComponentKind::kPartitioner, "p"), Make(1)).ok());
    r.CommitPlugin();
    token.reset();
    EXPECT_FALSE(watch.expired());  // held by the entry
    auto made = r.CreateEntry(ComponentKind::kPartitioner, "p", {});
    ASSERT_TRUE(made.ok());
    instance = *made;
  }
  EXPECT_FALSE(watch.expired());  // the registry is gone; the instance still holds the library
  instance.reset();
  EXPECT_TRUE(watch.expired());
}

TEST(RegistryTest, TypedAddAndCreate) {
  class P : public Partitioner {
   public:
    absl::StatusOr<Plan> Partition(const PlanningContext&) override { return absl::UnimplementedError("x"); }
  };
  Registry r;
  ASSERT_TRUE(r.Add<Partitioner>("typed", "a typed one", {},
                                 [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
                                   return std::make_unique<P>();
                                 }).ok());
  ASSERT_NE(r.Find(ComponentKind::kPartitioner, "typed"), nullptr);
  auto made = r.Create<Partitioner>("typed", {});
  ASSERT_TRUE(made.ok());
  EXPECT_NE(dynamic_cast<P*>(made->get()), nullptr);
}

TEST(ParamReaderTest, AnUndeclaredNameIsAnErrorNotADefault) {
  ParamSet p;
  p.Set("tp_chunks", std::int64_t{2});
  p.Set("overlap", true);
  ParamReader r(p, "scheduler 'x'");
  EXPECT_EQ(r.Get<std::int64_t>("tp_chunks"), 2);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.Get<std::int64_t>("tp_chunk"), 0);  // misspelt: T{}, and remembered
  EXPECT_TRUE(r.Get<bool>("overlap"));            // later reads still work
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("scheduler 'x': no parameter named 'tp_chunk' (not declared)"));
  ParamReader typed(p);
  (void)typed.Get<double>("overlap");
  EXPECT_EQ(typed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(typed.status().message()), ::testing::HasSubstr("parameter 'overlap' is a bool"));
}

TEST(ComponentKindTest, NamesRoundTrip) {
  for (ComponentKind k : kAllComponentKinds) EXPECT_EQ(KindFromName(KindName(k)), k);
  EXPECT_EQ(KindFromName("partitioner"), ComponentKind::kPartitioner);
  EXPECT_EQ(KindFromName("device_model"), ComponentKind::kDeviceModel);
  EXPECT_FALSE(KindFromName("partitioners").has_value());
}

}  // namespace
}  // namespace testbed
