#include "exec/gradient_tasks.h"

#include <chrono>
#include <optional>
#include <string>

#include "exec/gpt_stack.h"
#include "testbed/status_macros.h"

namespace testbed::exec {

using Clock = std::chrono::steady_clock;

absl::Status GradientTasks::Exchange(const Task& t) {
  // The gradients of the task's iteration (under PipeDream-2BW the next one's may be
  // accumulating by now).
  return s_.versions.WithGradientsOf(t.iteration, [&] { return ExchangeHeld(t); });
}

absl::Status GradientTasks::ExchangeHeld(const Task& t) {
  CommGroup* group = s_.Group(t.group);
  if (group == nullptr) return absl::InternalError("not a member of the task's data-parallel group");
  // The bucket's plain gradients in one all-reduce; compressed tensors each on their own
  // (a compressor works on one tensor at a time and keeps its state per tensor).
  std::vector<train::Param<float>*> plain;
  for (int l = t.first_layer; l < t.end_layer; ++l) {
    if (!s_.HoldsLayer(l)) continue;
    const bool compress = s_.in.make_compressor && (!s_.in.compress_layer || s_.in.compress_layer(l));
    for (train::Param<float>* p : s_.model.layer(l).Params()) {
      if (!compress) {
        plain.push_back(p);
        continue;
      }
      std::vector<float> flat(p->grad.data(), p->grad.data() + p->grad.size());
      TESTBED_RETURN_IF_ERROR(Compressed(*group, p->name, flat));
      std::copy(flat.begin(), flat.end(), p->grad.data());
    }
  }
  std::vector<float> flat;
  for (train::Param<float>* p : plain) flat.insert(flat.end(), p->grad.data(), p->grad.data() + p->grad.size());
  if (flat.empty()) return absl::OkStatus();
  s_.metrics.data_parallel_bytes += static_cast<double>(flat.size()) * sizeof(float);
  TESTBED_RETURN_IF_ERROR(group->AllReduce(std::span<float>(flat), ReduceOp::kSum));
  size_t offset = 0;
  for (train::Param<float>* p : plain) {
    std::copy(flat.begin() + static_cast<std::ptrdiff_t>(offset),
              flat.begin() + static_cast<std::ptrdiff_t>(offset + static_cast<size_t>(p->grad.size())), p->grad.data());
    offset += static_cast<size_t>(p->grad.size());
  }
  return absl::OkStatus();
}

// Sums one tensor's gradient `flat` over the data-parallel group through the compressor:
// mergeable payloads part by part with an all-reduce, others whole by all-gather.
absl::Status GradientTasks::Compressed(CommGroup& group, const std::string& tensor, std::vector<float>& flat) {
  auto& comp = compressors_[tensor];
  if (comp == nullptr) {
    TESTBED_ASSIGN_OR_RETURN(comp, s_.in.make_compressor());
  }
  EncodeContext ctx;
  ctx.rank = group.rank();
  ctx.step = s_.step;
  DecodeOptions opt;
  opt.ranks = group.size();
  opt.average = false;
  auto timed = [this](double& total, auto&& f) {
    const auto t0 = Clock::now();
    auto r = f();
    total += std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  };
  TESTBED_ASSIGN_OR_RETURN(Payload payload, timed(s_.metrics.encode_s, [&] { return comp->Encode(flat, ctx); }));
  s_.metrics.compressed_dense_bytes += static_cast<double>(flat.size()) * sizeof(float);
  s_.metrics.compressed_wire_bytes += static_cast<double>(payload.bytes());
  if (comp->mergeable()) {
    for (PayloadPart& part : payload.parts) {
      s_.metrics.data_parallel_bytes += static_cast<double>(part.bytes());
      TESTBED_RETURN_IF_ERROR(group.AllReduce(part.raw(), part.raw(), part.elements, part.type, part.op));
    }
    std::vector<Payload> one;
    one.push_back(std::move(payload));
    return timed(s_.metrics.decode_s, [&] { return comp->Decode(one, opt, flat); });
  }
  // Whole payloads by all-gather: sizes first, then each part's bytes.
  std::vector<Payload> all(static_cast<size_t>(group.size()));
  for (size_t p = 0; p < payload.parts.size(); ++p) {
    PayloadPart& part = payload.parts[p];
    std::int64_t mine = part.elements;
    std::vector<std::int64_t> counts(static_cast<size_t>(group.size()));
    TESTBED_RETURN_IF_ERROR(group.AllGather(&mine, counts.data(), 1, DataType::kInt64));
    std::int64_t total = 0;
    for (std::int64_t c : counts) total += c;
    const size_t elem = DataTypeSize(part.type);
    std::vector<std::byte> gathered(static_cast<size_t>(total) * elem);
    s_.metrics.data_parallel_bytes += static_cast<double>(part.bytes());
    TESTBED_RETURN_IF_ERROR(group.AllGatherV(part.raw(), gathered.data(), counts, part.type));
    std::int64_t offset = 0;
    for (int r = 0; r < group.size(); ++r) {
      PayloadPart copy;
      copy.name = part.name;
      copy.type = part.type;
      copy.op = part.op;
      copy.elements = counts[static_cast<size_t>(r)];
      copy.data.assign(gathered.begin() + static_cast<std::ptrdiff_t>(offset * static_cast<std::int64_t>(elem)),
                       gathered.begin() + static_cast<std::ptrdiff_t>((offset + copy.elements) * static_cast<std::int64_t>(elem)));
      offset += copy.elements;
      all[static_cast<size_t>(r)].parts.push_back(std::move(copy));
    }
  }
  return timed(s_.metrics.decode_s, [&] { return comp->Decode(all, opt, flat); });
}

absl::Status GradientTasks::OptimizerStep(int iteration) {
  // PipeDream-2BW: the micro-batches in flight keep the weights their forward used.
  s_.versions.BeforeStep();
  TESTBED_RETURN_IF_ERROR(s_.versions.WithGradientsOf(iteration, [&] { return StepHeld(iteration); }));
  s_.versions.AfterStep(iteration);
  // The iteration's batch has served every task of this rank by its step.
  if (s_.overlapping) s_.data_of.erase(iteration);
  return absl::OkStatus();
}

absl::Status GradientTasks::StepHeld(int iteration) {
  // The gradient norm counts each element once: sharded parameters on every tensor rank,
  // replicated ones on rank 0 only, and one data-parallel replica (under ZeRO, each replica's
  // part).
  auto counted = [this](const std::string& name) { return s_.tp_rank == 0 || ParamIsSharded(name); };
  if (s_.shards.active()) {
    s_.AddGradSq(iteration, s_.shards.GradSq(counted));
  } else if (s_.dp_rank == 0) {
    double sq = 0;
    for (train::Param<float>* p : s_.params) {
      if (counted(p->name)) sq += static_cast<double>(p->grad.squaredNorm());
    }
    s_.AddGradSq(iteration, sq);
  }
  // Under ZeRO the optimizer steps this rank's parts.
  const std::vector<train::Param<float>*> stepped = s_.shards.active() ? s_.shards.Params() : s_.params;
  if (s_.in.weight_decay != 0) {
    const float wd = static_cast<float>(s_.in.weight_decay);
    for (train::Param<float>* p : stepped) p->grad += wd * p->value;
  }
  s_.applied_delay = 0;
  bool apply = true;
  if (s_.delayed != nullptr) {
    const std::optional<int> tau = s_.delayed->Exchange(stepped);
    s_.applied_delay = tau.value_or(-1);
    apply = tau.has_value();
  }
  if (apply) s_.optimizer->Step(stepped);
  for (train::Param<float>* p : s_.params) p->ZeroGrad();
  if (s_.shards.active()) s_.shards.AfterStep();
  ++s_.step;
  return absl::OkStatus();
}

absl::Status GradientTasks::ReduceScatter(const Task& t) {
  CommGroup* group = s_.Group(t.group);
  if (group == nullptr) return absl::InternalError("not a member of the task's data-parallel group");
  if (!s_.shards.active()) return absl::InternalError("a gradient reduce-scatter without ZeRO sharding");
  TESTBED_ASSIGN_OR_RETURN(const double bytes, s_.shards.ReduceScatter(*group, t.first_layer, t.end_layer, streams::LinkClassOf(t.stream)));
  s_.metrics.data_parallel_bytes += bytes;
  return absl::OkStatus();
}

absl::Status GradientTasks::GatherLayer(const Task& t) {
  CommGroup* group = s_.Group(t.group);
  if (group == nullptr) return absl::InternalError("not a member of the task's parameter group");
  return s_.shards.Gather(*group, t.first_layer, streams::LinkClassOf(t.stream));
}

absl::Status GradientTasks::GatherAll(const Task& t) {
  CommGroup* group = s_.Group(t.group);
  if (group == nullptr) return absl::InternalError("not a member of the task's parameter group");
  // One bucket's layers (param_gather_overlap), or every layer the rank holds.
  if (t.end_layer > t.first_layer) return s_.shards.GatherRange(*group, t.first_layer, t.end_layer);
  return s_.shards.GatherAll(*group);
}

}  // namespace testbed::exec
