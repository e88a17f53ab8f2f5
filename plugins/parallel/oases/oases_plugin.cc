// Plugin "parallel_oases": Oases (automated tensor parallelism with overlapped communication).
// Components: tp_planner `oases` (the public planner's integer program, solved exactly, then
// the runtime's two segments), tp_planner `alpa_style` (the same program without overlap:
// each op costs compute + communication, Alpa's intra-op view), scheduler `oases.overlap`
// (two sub-batches per micro-batch, each one's all-reduce under the other's compute, across
// ops and layers; recomputation that keeps the reduced outputs and runs each layer's just
// before its backward, filling the wait for the previous layer's all-reduce).
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chain_solver.h"
#include "op_costs.h"
#include "testbed/pipeline_program.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"
#include "testbed/tp_planner.h"

namespace testbed::oases {
namespace {

struct PlannerSettings {
  std::string name;
  CostSettings costs;
  bool two_segments = true;  // the public runtime's layout; false: the ILP's per-op degrees
};

// A refusal for memory that names the op needing the most at its leanest degree.
absl::Status MemoryError(const OpCosts& c, const ChainProblem& p, const ModelGraph& model, const absl::Status& st) {
  size_t worst = 0;
  double worst_bytes = 0;
  int worst_degree = 0;
  for (size_t i = 0; i < p.memory.size(); ++i) {
    const auto it = std::min_element(p.memory[i].begin(), p.memory[i].end());
    if (*it > worst_bytes) {
      worst_bytes = *it;
      worst = i;
      worst_degree = c.degrees[static_cast<size_t>(it - p.memory[i].begin())];
    }
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s; op '%s' alone needs %.2f GiB even at its leanest degree %d (activations of its group batch and 5 x its "
      "fp32 weights%s), of a budget of %.2f GiB per device: use more devices or a smaller micro-batch",
      st.message(), model.layers[static_cast<size_t>(c.ops[worst])].name, worst_bytes / 1073741824.0, worst_degree,
      worst + 1 == p.memory.size() ? ", plus the embedding and head" : "", p.budget / 1073741824.0));
}

class ChainPlanner final : public TpPlanner {
 public:
  explicit ChainPlanner(PlannerSettings s) : s_(std::move(s)) {}

  absl::StatusOr<TpAssignment> Assign(const RefineContext& ctx) override {
    const auto t0 = std::chrono::steady_clock::now();
    const ModelGraph& model = ctx.planning.model;
    TESTBED_ASSIGN_OR_RETURN(const OpCosts costs, MeasureOps(ctx.planning, ctx.plan, s_.costs));
    const ChainProblem problem = BuildProblem(costs, s_.costs.overlap);
    absl::StatusOr<ChainSolution> sol = SolveChain(problem);
    if (!sol.ok()) {
      if (sol.status().code() == absl::StatusCode::kResourceExhausted) return MemoryError(costs, problem, model, sol.status());
      return sol.status();
    }
    std::vector<int> per_op;
    for (int c : sol->choice) per_op.push_back(costs.degrees[static_cast<size_t>(c)]);
    const std::vector<int> runtime = s_.two_segments ? TwoSegments(per_op) : per_op;
    TpAssignment a;
    a.degrees.assign(model.layers.size(), runtime.front());
    for (size_t i = 0; i < costs.ops.size(); ++i) a.degrees[static_cast<size_t>(costs.ops[i])] = runtime[i];
    for (size_t l = 0; l < model.layers.size(); ++l) {
      if (model.layers[l].kind == LayerKind::kHead) a.degrees[l] = runtime.back();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    a.metrics.Add("tp_planning_s", took, "s", Better::kLower);
    a.metrics.Add("tp_plan_objective_s", sol->cost, "s", Better::kLower);
    a.metrics.Add("tp_plan_memory_bytes", sol->memory, "B", Better::kLower);
    a.metrics.Add("tp_plan_labels", static_cast<double>(sol->labels), "1");
    Table t;
    t.name = "tp_plan";
    std::vector<std::string> names;
    std::vector<std::int64_t> ilp, run;
    std::vector<double> fwd, bwd, comm, mem;
    for (size_t i = 0; i < costs.ops.size(); ++i) {
      const auto j = static_cast<size_t>(sol->choice[i]);
      names.push_back(model.layers[static_cast<size_t>(costs.ops[i])].name);
      ilp.push_back(per_op[i]);
      run.push_back(runtime[i]);
      fwd.push_back(costs.fwd[i][j]);
      bwd.push_back(costs.bwd[i][j]);
      comm.push_back(costs.comm[i][j]);
      mem.push_back(costs.memory[i][j]);
    }
    t.columns = {{"op", "", names},        {"ilp_degree", "devices", ilp}, {"degree", "devices", run},
                 {"forward_s", "s", fwd}, {"backward_s", "s", bwd},       {"allreduce_s", "s", comm},
                 {"memory_bytes", "B", mem}};
    a.tables.push_back(std::move(t));
    return a;
  }

 private:
  PlannerSettings s_;
};

class OverlapScheduler final : public Scheduler {
 public:
  explicit OverlapScheduler(ExpandOptions o) : o_(o) {}
  absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    return ExpandOneFOneB(ctx, o_, "oases.overlap");
  }

 private:
  ExpandOptions o_;
};

std::vector<ParamSpec> PlannerParams(bool overlap) {
  return {
      ParamSpec::Double("memory_fraction", 0.95).Range(0.05, 1.0).Doc("share of device memory the plan may use"),
      ParamSpec::Choice("layout", overlap ? "two_segments" : "per_op", {"two_segments", "per_op"})
          .Doc("two_segments: the public runtime's layout (the two most frequent degrees, the lower first); per_op: "
               "the integer program's degree for every op"),
  };
}

absl::StatusOr<std::unique_ptr<TpPlanner>> MakePlanner(const ParamSet& p, std::string name, bool overlap) {
  ParamReader read(p, name);
  PlannerSettings s;
  s.name = std::move(name);
  s.costs.overlap = overlap;
  s.costs.memory_fraction = read.Get<double>("memory_fraction");
  s.two_segments = read.Get<std::string>("layout") == "two_segments";
  TESTBED_RETURN_IF_ERROR(read.status());
  return std::make_unique<ChainPlanner>(std::move(s));
}

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<TpPlanner>(
      "oases", "Oases: per-op tensor-parallel degrees from an overlap-aware cost model (exact optimum), two segments",
      PlannerParams(true), [](const ParamSet& p) { return MakePlanner(p, "oases", true); }));
  TESTBED_RETURN_IF_ERROR(r.Add<TpPlanner>(
      "alpa_style", "Alpa-style intra-op planner: Oases' integer program without overlap (op = compute + communication)",
      PlannerParams(false), [](const ParamSet& p) { return MakePlanner(p, "alpa_style", false); }));
  std::vector<ParamSpec> params;
  for (ParamSpec& spec : ExpandOptionParams()) {
    const std::string& n = spec.name();
    if (n == "tp_chunks" || n == "tp_overlap" || n == "recompute_collectives" || n == "recompute_interleaved" ||
        n == "tp_chunk_join") {
      continue;
    }
    params.push_back(std::move(spec));
  }
  params.push_back(ParamSpec::Int("sub_batches", 2).Range(1, 8).Doc("sub-batches per micro-batch (1: no overlap)"));
  params.push_back(ParamSpec::Bool("keep_reduced_outputs", true)
                       .Doc("the forward keeps each op's all-reduced output so recomputation repeats no all-reduce"));
  params.push_back(ParamSpec::Bool("cross_pass", true)
                       .Doc("recompute each layer just before its backward, under the previous layer's all-reduce"));
  return r.Add<Scheduler>(
      "oases.overlap", "Oases' schedule: overlapped sub-batches across ops and layers, fine-grained recomputation",
      std::move(params), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
        TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
        ParamReader read(p, "oases.overlap");
        o.tp_chunks = static_cast<int>(read.Get<std::int64_t>("sub_batches"));
        o.recompute_collectives = !read.Get<bool>("keep_reduced_outputs");
        o.recompute_interleaved = read.Get<bool>("cross_pass");
        TESTBED_RETURN_IF_ERROR(read.status());
        o.tp_overlap = o.tp_chunks > 1;
        o.tp_chunk_join = false;
        return std::make_unique<OverlapScheduler>(o);
      });
}

}  // namespace
}  // namespace testbed::oases

TESTBED_PLUGIN("parallel_oases", "1.0.0", "Oases: overlapped, automated tensor model parallelism", testbed::oases::Register)
