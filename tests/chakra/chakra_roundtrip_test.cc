// Export then import: every scheduler's schedule of a small plan (GPT, TP 2 x PP 2 x DP 2
// on a DGX A100, 4 micro-batches; also ZeRO-3, and two chunks per stage for interleaving) written as Chakra traces, through the wire
// format, and read back gives the same tasks on the same streams in the same order, the same
// dependencies, and the same simulated iteration time.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chakra/et_io.h"
#include "chakra/export.h"
#include "chakra/import.h"
#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed::testing {
namespace {

std::string Experiment(const std::string& scheduler, int zero_stage, int virtual_stages) {
  return absl::StrCat(R"([experiment]
name = "roundtrip"
backend = "sim"
[model]
name = "tiny-gpt"
layers = 8
hidden = 512
heads = 8
seq_len = 256
vocab = 1000
[cluster]
preset = "dgx-a100"
[parallel]
tp = 2
pp = 2
dp = 2
zero_stage = )", zero_stage, R"(
virtual_stages = )", virtual_stages, R"(
[train]
micro_batch = 1
micro_batches = 4
[sim]
enforce_memory = false
[[arm]]
name = "a"
scheduler = ")", scheduler, R"("
)");
}

// What a task is, apart from its id and its dependencies.
std::string Signature(const Schedule& s, TaskId id, double seconds) {
  const Task& t = s.task(id);
  const auto devs = s.DevicesOf(id);
  const bool compute = t.kind == TaskKind::kCompute || t.kind == TaskKind::kKernel;
  std::string sig = absl::StrCat(compute ? "compute" : TaskKindName(t.kind), " stream ", t.stream, " it ", t.iteration,
                                 " on");
  for (DeviceId d : devs) absl::StrAppend(&sig, " ", d);
  if (compute) return absl::StrCat(sig, " ", absl::StrFormat("%.17g", seconds));
  absl::StrAppend(&sig, " bytes ", t.bytes, " peer ", t.peer);
  if (t.kind == TaskKind::kCollective) absl::StrAppend(&sig, " ", CollectiveOpName(t.op));
  return sig;
}

class ChakraRoundTrip : public ExperimentRuns {};

TEST_F(ChakraRoundTrip, EverySchedulersScheduleComesBack) {
  std::vector<std::tuple<std::string, int, int>> cases;  // scheduler, ZeRO stage, chunks per stage
  for (const ComponentEntry* e : registry_.List(ComponentKind::kScheduler)) cases.emplace_back(e->decl.name, 0, 1);
  cases.emplace_back("1f1b", 3, 1);
  cases.emplace_back("interleaved_1f1b", 0, 2);
  int checked = 0;
  std::string skipped;
  for (const auto& [name, zero, chunks] : cases) {
    SCOPED_TRACE(absl::StrCat(name, " zero ", zero, " chunks ", chunks));
    WriteFile(dir_ / "x.toml", Experiment(name, zero, chunks));
    auto ex = Experiment::Load(dir_ / "x.toml", {});
    ASSERT_TRUE(ex.ok()) << ex.status();
    auto run = ResolveRun(ex->runs().front(), registry_, presets_);
    ASSERT_TRUE(run.ok()) << run.status();
    auto rs = BuildRunSchedule(*run, registry_);
    if (!rs.ok()) {  // a scheduler for other plans (the error is its own refusal)
      absl::StrAppend(&skipped, name, ": ", rs.status().message(), "\n");
      continue;
    }
    const Schedule& a = rs->schedule;
    auto exported = chakra::ExportSchedule(a, rs->durations, "test");
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_TRUE(exported->warnings.empty()) << exported->warnings.front();
    // Through the wire format.
    chakra::TraceSet set = exported->set;
    for (chakra::Trace& t : set.ranks) {
      auto back = chakra::DecodeTrace(chakra::EncodeTrace(t), "rank");
      ASSERT_TRUE(back.ok()) << back.status();
      t = *back;
    }
    auto imported = chakra::ImportTraceSet(set, "roundtrip");
    ASSERT_TRUE(imported.ok()) << imported.status();
    EXPECT_TRUE(imported->warnings.empty()) << imported->warnings.front();
    const Schedule& b = imported->schedule;
    ASSERT_TRUE(b.Check().ok()) << b.Check();
    ASSERT_EQ(b.size(), a.size());
    // The same tasks per device and stream, in order; the positions map a's ids to b's.
    std::map<TaskId, TaskId> to_b;
    for (int d = 0; d < a.num_devices(); ++d) {
      for (int st = 0; st < streams::kCount; ++st) {
        const auto& oa = a.Order(d, st);
        const auto& ob = d < b.num_devices() ? b.Order(d, st) : std::vector<TaskId>{};
        ASSERT_EQ(oa.size(), ob.size()) << "device " << d << " stream " << st;
        for (size_t k = 0; k < oa.size(); ++k) {
          const double sb = b.task(ob[k]).kind == TaskKind::kKernel ? b.kernel(ob[k]).seconds : 0;
          ASSERT_EQ(Signature(a, oa[k], rs->durations[static_cast<size_t>(oa[k])]), Signature(b, ob[k], sb));
          to_b[oa[k]] = ob[k];
        }
      }
    }
    for (TaskId t = 0; t < static_cast<TaskId>(a.size()); ++t) {
      std::set<TaskId> da, db;
      for (TaskId d : a.deps(t)) da.insert(to_b.at(d));
      for (TaskId d : b.deps(to_b.at(t))) db.insert(d);
      ASSERT_EQ(da, db) << a.Describe(t);
    }
    // The same simulated time.
    auto prepared = PrepareSimRun(*run, registry_, RunControl{});
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    const ModelGraph none;
    auto ra = Simulate(a, SimInputs{*run->model, *run->cluster, *(*prepared)->device_model, *(*prepared)->collective}, {});
    auto rb = Simulate(b, SimInputs{none, *run->cluster, *(*prepared)->device_model, *(*prepared)->collective}, {});
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_NEAR(rb->iteration_time_s, ra->iteration_time_s, ra->iteration_time_s * 1e-12);
    ++checked;
  }
  std::printf("round trip: %d schedules checked; not for this plan:\n%s", checked, skipped.c_str());
  EXPECT_GE(checked, 9);
}

}  // namespace
}  // namespace testbed::testing
