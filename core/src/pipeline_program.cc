#include "testbed/pipeline_program.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "testbed/status_macros.h"

namespace testbed {

int PipelineProgram::NumMicroBatches() const {
  int n = 0;
  for (const auto& ops : stages) {
    for (const PipelineOp& op : ops) n = std::max(n, op.micro_batch + 1);
  }
  return n;
}

namespace {

template <typename T, typename V>
absl::Status ReadIfDeclared(const ParamSet& params, const char* name, V& out) {
  if (!params.Has(name)) return absl::OkStatus();
  TESTBED_ASSIGN_OR_RETURN(T v, params.Get<T>(name));
  out = static_cast<V>(v);
  return absl::OkStatus();
}

}  // namespace

std::vector<ParamSpec> ExpandOptionParams() {
  return {
      ParamSpec::Int("tp_chunks", 1).Range(1, 16).Doc("split each layer's compute so its tensor-parallel collective overlaps the next part"),
      ParamSpec::Bool("tp_overlap", false).Doc("tensor-parallel collectives on their own stream instead of blocking compute"),
      ParamSpec::Double("dp_bucket_mib", 25.0).Min(0.001).Unit("MiB").Doc("gradient all-reduce bucket size"),
      ParamSpec::Bool("dp_overlap", true).Doc("start gradient buckets during the backward pass"),
      ParamSpec::Bool("param_gather_overlap", false)
          .Doc("ZeRO-1/2: all-gather the updated weights per bucket, each layer's next forward waiting only for its "
               "bucket (Megatron-Core's overlap_param_gather)"),
      ParamSpec::Bool("recompute_after_gradient", false)
          .Doc("recompute a checkpointed micro-batch only once its gradient has arrived (Megatron-LM, DeepSpeed)"),
      ParamSpec::Bool("recompute_collectives", true)
          .Doc("recomputing a tensor-parallel layer repeats its forward all-reduce (false: Oases keeps the reduced outputs)"),
      ParamSpec::Bool("recompute_interleaved", false)
          .Doc("recompute each checkpointed layer just before its own backward (Oases' cross-pass schedule)"),
      ParamSpec::Bool("tp_chunk_join", false)
          .Doc("each layer's sub-batches wait for all of the previous layer's collectives (Wang et al.'s decomposition)"),
      ParamSpec::Bool("tp_chunk_time_share", false)
          .Doc("each sub-batch of a tensor-parallel layer costs its share of the whole layer's time (only the GEMMs are "
               "chunked, as in Transformer Engine's userbuffers) instead of the layer's time on fewer samples"),
  };
}

absl::StatusOr<ExpandOptions> ExpandOptionsFrom(const ParamSet& params) {
  ExpandOptions o;
  // A scheduler that fixes an option itself leaves its parameter undeclared; it keeps the
  // default here and the scheduler sets it.
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<std::int64_t>(params, "tp_chunks", o.tp_chunks));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "tp_overlap", o.tp_overlap));
  double mib = static_cast<double>(o.dp_bucket_bytes) / 1048576.0;
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<double>(params, "dp_bucket_mib", mib));
  o.dp_bucket_bytes = static_cast<std::int64_t>(mib * 1048576.0);
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "dp_overlap", o.dp_overlap));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "param_gather_overlap", o.param_gather_overlap));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "recompute_after_gradient", o.recompute_after_gradient));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "recompute_collectives", o.recompute_collectives));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "recompute_interleaved", o.recompute_interleaved));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "tp_chunk_join", o.tp_chunk_join));
  TESTBED_RETURN_IF_ERROR(ReadIfDeclared<bool>(params, "tp_chunk_time_share", o.tp_chunk_time_share));
  if (o.tp_chunks > 1) o.tp_overlap = true;  // chunks exist to overlap
  return o;
}

PipelineProgram GPipeProgram(int pp, int m) {
  PipelineProgram p;
  p.stages.resize(static_cast<size_t>(pp));
  for (auto& ops : p.stages) {
    for (int i = 0; i < m; ++i) ops.push_back({PipelineOp::Kind::kForward, 0, i});
    for (int i = m - 1; i >= 0; --i) ops.push_back({PipelineOp::Kind::kBackward, 0, i});
  }
  return p;
}

PipelineProgram OneFOneBProgram(int pp, int m) {
  PipelineProgram p;
  p.stages.resize(static_cast<size_t>(pp));
  for (int s = 0; s < pp; ++s) {
    auto& ops = p.stages[static_cast<size_t>(s)];
    const int warmup = std::min(pp - s - 1, m);
    for (int i = 0; i < warmup; ++i) ops.push_back({PipelineOp::Kind::kForward, 0, i});
    for (int i = 0; i < m - warmup; ++i) {
      ops.push_back({PipelineOp::Kind::kForward, 0, warmup + i});
      ops.push_back({PipelineOp::Kind::kBackward, 0, i});
    }
    for (int i = m - warmup; i < m; ++i) ops.push_back({PipelineOp::Kind::kBackward, 0, i});
  }
  return p;
}

absl::StatusOr<PipelineProgram> InterleavedProgram(int pp, int chunks, int m, int group) {
  if (chunks < 2) return absl::InvalidArgumentError("interleaved 1F1B needs at least 2 model chunks per stage");
  if (m < pp) {
    return absl::InvalidArgumentError(absl::StrCat("interleaved 1F1B needs at least as many micro-batches (", m,
                                                   ") as pipeline stages (", pp, ")"));
  }
  // Megatron-Core's rules: a group holds pp to m micro-batches, and the last group, what is
  // left, none or at least pp (fewer leave the stages waiting on each other: dependency
  // bubbles). By default the pipeline depth, or where m is not a multiple of it the smallest
  // group the rules accept.
  auto accepted = [&](int g) { return g >= pp && g <= m && (m % g == 0 || m % g >= pp); };
  if (group == 0) {
    group = pp;
    while (!accepted(group)) ++group;  // m itself is accepted
  }
  if (group < pp || group > m) {
    return absl::InvalidArgumentError(absl::StrCat("interleaved 1F1B: micro-batch groups of ", group,
                                                   " must hold from the pipeline depth (", pp,
                                                   ") to the micro-batch count (", m, ")"));
  }
  if (!accepted(group)) {
    return absl::InvalidArgumentError(absl::StrCat("interleaved 1F1B: ", m, " micro-batches in groups of ", group,
                                                   " leave a last group of ", m % group,
                                                   ", fewer than the pipeline depth (", pp,
                                                   "); Megatron-Core refuses it (dependency bubbles)"));
  }
  PipelineProgram p;
  p.stages.resize(static_cast<size_t>(pp));
  // Groups other than pp meet a stage's activations and gradients in orders its neighbours
  // do not share; Megatron-Core posts each step's transfers of both directions together.
  p.p2p_by_direction = group != pp;  // an accepted group of pp means m is a multiple of pp
  const int total = m * chunks;
  // Megatron-Core's schedule table: the micro-batches in groups of `group` (the last group
  // takes what is left), each group running chunk 0 of its micro-batches, then chunk 1, and
  // so on; virtual micro-batch k is entry k of the table, and backwards visit the table with
  // the chunks reversed. With m a multiple of pp and groups of pp this is Megatron-LM's
  // original order.
  std::vector<std::pair<int, int>> table;  // (micro-batch, chunk)
  for (int first = 0; first < m; first += group) {
    const int end = first + group >= m ? m : first + group;
    for (int c = 0; c < chunks; ++c) {
      for (int mb = first; mb < end; ++mb) table.emplace_back(mb, c);
    }
  }
  for (int s = 0; s < pp; ++s) {
    auto& ops = p.stages[static_cast<size_t>(s)];
    const int warmup = std::min(total, (pp - s - 1) * 2 + (chunks - 1) * group);
    auto forward = [&](int k) {
      const auto [mb, c] = table[static_cast<size_t>(k)];
      ops.push_back({PipelineOp::Kind::kForward, c, mb});
    };
    auto backward = [&](int k) {
      const auto [mb, c] = table[static_cast<size_t>(k)];
      ops.push_back({PipelineOp::Kind::kBackward, chunks - 1 - c, mb});
    };
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int i = 0; i < total - warmup; ++i) {
      forward(warmup + i);
      backward(i);
    }
    for (int i = total - warmup; i < total; ++i) backward(i);
  }
  return p;
}

absl::Status CheckProgram(const PipelineProgram& program, int pp, int chunks, int micro_batches, int iterations) {
  if (static_cast<int>(program.stages.size()) != pp) {
    return absl::InvalidArgumentError(absl::StrCat("program has ", program.stages.size(), " stages; the plan has ", pp));
  }
  if (!program.micro_batch_fraction.empty() &&
      static_cast<int>(program.micro_batch_fraction.size()) != micro_batches) {
    return absl::InvalidArgumentError("micro_batch_fraction must list every micro-batch");
  }
  const int its = program.spans_iterations ? iterations : 1;
  for (int s = 0; s < pp; ++s) {
    // state per (iteration, chunk, mb): 0 nothing, 1 forward seen, 2 recompute seen, 3 backward seen
    const size_t per_it = static_cast<size_t>(chunks * micro_batches);
    std::vector<int> state(per_it * static_cast<size_t>(its), 0);
    std::vector<int> backwards(static_cast<size_t>(its), 0);
    std::vector<int> steps(static_cast<size_t>(its), 0);
    for (const PipelineOp& op : program.stages[static_cast<size_t>(s)]) {
      const int it = program.spans_iterations ? op.iteration : 0;
      if (it < 0 || it >= its) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": op of iteration ", op.iteration, " outside the ", its,
                                                       " iterations"));
      }
      if (op.kind == PipelineOp::Kind::kOptimizerStep) {
        if (!program.spans_iterations) {
          return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": an optimizer step in a one-iteration program (the expansion adds it)"));
        }
        if (backwards[static_cast<size_t>(it)] != chunks * micro_batches || steps[static_cast<size_t>(it)]++ != 0) {
          return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": the optimizer step of iteration ", it,
                                                         " comes before that iteration's backwards or twice"));
        }
        continue;
      }
      if (op.chunk < 0 || op.chunk >= chunks || op.micro_batch < 0 || op.micro_batch >= micro_batches) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": op on chunk ", op.chunk, ", micro-batch ",
                                                       op.micro_batch, " is out of range"));
      }
      int& st = state[static_cast<size_t>(it) * per_it + static_cast<size_t>(op.chunk * micro_batches + op.micro_batch)];
      const std::string what = absl::StrCat("stage ", s, its > 1 ? absl::StrCat(", iteration ", it) : "", ", chunk ", op.chunk,
                                            ", micro-batch ", op.micro_batch);
      switch (op.kind) {
        case PipelineOp::Kind::kForward:
          if (st != 0) return absl::InvalidArgumentError(absl::StrCat(what, ": forward twice or after backward"));
          st = 1;
          break;
        case PipelineOp::Kind::kRecompute:
          if (st != 1) return absl::InvalidArgumentError(absl::StrCat(what, ": recompute not between forward and backward"));
          st = 2;
          break;
        case PipelineOp::Kind::kBackward:
          if (st != 1 && st != 2) return absl::InvalidArgumentError(absl::StrCat(what, ": backward before forward or twice"));
          st = 3;
          ++backwards[static_cast<size_t>(it)];
          break;
        case PipelineOp::Kind::kOptimizerStep:
          break;
      }
    }
    for (size_t i = 0; i < state.size(); ++i) {
      if (state[i] != 3) {
        const size_t within = i % per_it;
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, its > 1 ? absl::StrCat(", iteration ", i / per_it) : "",
                                                       ", chunk ", within / static_cast<size_t>(micro_batches),
                                                       ", micro-batch ", within % static_cast<size_t>(micro_batches),
                                                       ": missing its forward or backward"));
      }
    }
    for (int it = 0; program.spans_iterations && it < its; ++it) {
      if (steps[static_cast<size_t>(it)] != 1) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": no optimizer step for iteration ", it));
      }
    }
  }
  return absl::OkStatus();
}

PipelineProgram PipeDream2BWProgram(int pp, int m, int iterations, bool deferred_update) {
  PipelineProgram p;
  p.spans_iterations = true;
  p.weight_versions = 2;
  p.stages.resize(static_cast<size_t>(pp));
  const int total = m * iterations;
  auto op = [&](PipelineOp::Kind kind, int k) {
    PipelineOp o;
    o.kind = kind;
    o.micro_batch = k % m;
    o.iteration = k / m;
    return o;
  };
  for (int s = 0; s < pp; ++s) {
    std::vector<PipelineOp> flat;
    const int warmup = std::min(pp - s - 1, total);
    for (int i = 0; i < warmup; ++i) flat.push_back(op(PipelineOp::Kind::kForward, i));
    for (int i = 0; i < total - warmup; ++i) {
      flat.push_back(op(PipelineOp::Kind::kForward, warmup + i));
      flat.push_back(op(PipelineOp::Kind::kBackward, i));
    }
    for (int i = total - warmup; i < total; ++i) flat.push_back(op(PipelineOp::Kind::kBackward, i));
    // Iteration i runs on W(i - 1); the update of iteration i's gradients makes W(i + 1), so it
    // goes just before the first forward of iteration i + 2 (or at the end).
    auto& ops = p.stages[static_cast<size_t>(s)];
    int next_step = 0;
    if (!deferred_update) {
      // Each iteration's step right after its last backward on this stage.
      for (const PipelineOp& o : flat) {
        ops.push_back(o);
        if (o.kind == PipelineOp::Kind::kBackward && o.micro_batch == m - 1) {
          PipelineOp st;
          st.kind = PipelineOp::Kind::kOptimizerStep;
          st.iteration = o.iteration;
          ops.push_back(st);
        }
      }
      continue;
    }
    for (const PipelineOp& o : flat) {
      if (o.kind == PipelineOp::Kind::kForward && o.micro_batch == 0 && o.iteration >= 2) {
        PipelineOp st;
        st.kind = PipelineOp::Kind::kOptimizerStep;
        st.iteration = next_step++;
        ops.push_back(st);
      }
      ops.push_back(o);
    }
    while (next_step < iterations) {
      PipelineOp st;
      st.kind = PipelineOp::Kind::kOptimizerStep;
      st.iteration = next_step++;
      ops.push_back(st);
    }
  }
  return p;
}

absl::StatusOr<Schedule> ExpandOneFOneB(const SchedulingContext& ctx, const ExpandOptions& options,
                                        std::string_view scheduler) {
  if (ctx.plan.virtual_stages() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(scheduler), " runs one model chunk per stage; the plan "
                                                   "has virtual stages (interleaved_1f1b runs them)"));
  }
  const int pp = ctx.plan.pp();
  return ExpandPipeline(
      ctx, ProgramSource([pp](int m) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(pp, m); }), options);
}

absl::StatusOr<Schedule> ExpandPipeDream2BW(const SchedulingContext& ctx, const ExpandOptions& options,
                                            bool deferred_update, std::string_view scheduler) {
  if (ctx.plan.virtual_stages() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(scheduler), " runs one model chunk per stage; the plan has virtual stages"));
  }
  const int pp = ctx.plan.pp(), iterations = ctx.iterations;
  const std::string who(scheduler);
  return ExpandPipeline(ctx,
                        ProgramSource([pp, iterations, deferred_update, who](int m) -> absl::StatusOr<PipelineProgram> {
                          // An iteration's update lands before the forwards of the iteration after
                          // next; with fewer micro-batches than stages some of those would already
                          // have run on the old weights.
                          if (m < pp) {
                            return absl::InvalidArgumentError(absl::StrCat(
                                who, " (PipeDream-2BW) coalesces the gradients of at least as many micro-batches "
                                "as there are stages (m >= depth); the plan runs ", m,
                                " micro-batches per iteration over ", pp,
                                " stages: raise train.global_batch or lower train.micro_batch"));
                          }
                          return PipeDream2BWProgram(pp, m, iterations, deferred_update);
                        }),
                        options);
}

}  // namespace testbed
