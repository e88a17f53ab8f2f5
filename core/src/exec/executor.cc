#include "exec/executor.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "exec/rank_runner.h"
#include "testbed/status_macros.h"

namespace testbed::exec {

namespace {

// The last step's traffic and timing over the world (per iteration on average for a schedule
// whose iterations overlap).
void Totals(const StepMetrics& m, double ranks, ExecutionResult& out) {
  out.pipeline_bytes_per_step = m.pipeline_bytes;
  out.data_parallel_bytes_per_step = m.data_parallel_bytes;
  out.tensor_parallel_bytes_per_step = m.tensor_parallel_bytes;
  out.tensor_parallel_overlapped_per_step = m.tensor_parallel_overlapped;
  out.encode_s_per_step = m.encode_s / ranks;  // mean over ranks
  out.decode_s_per_step = m.decode_s / ranks;
  out.compressed_dense_bytes_per_step = m.compressed_dense_bytes;
  out.compressed_wire_bytes_per_step = m.compressed_wire_bytes;
  out.weight_stash_bytes = m.peak_stash_bytes;
  out.held_gradient_bytes = m.peak_held_gradient_bytes;
  out.weight_bytes = m.weight_bytes;
}

}  // namespace

absl::StatusOr<ExecutionResult> Execute(const ExecutorInputs& inputs, std::vector<std::unique_ptr<CommGroup>> endpoints) {
  if (endpoints.empty()) return absl::InvalidArgumentError("no ranks to run on");
  for (const auto& e : endpoints) {
    // The engine's tensors live in host memory; a device-memory endpoint would be handed
    // pointers it cannot use.
    if (e->memory_space() != MemorySpace::kHost) {
      return absl::InvalidArgumentError(
          "the executor trains on the CPU and passes host buffers, but the communicator's endpoints take GPU "
          "memory; with the nccl communicator set its parameter host_buffers = true");
    }
  }
  const size_t n = endpoints.size();
  std::vector<ExecutionResult> results(n);
  std::vector<absl::Status> status(n);
  std::mutex mu;
  // Every rank's matrix-product backend before any rank starts, so that a missing GPU is one
  // clear error rather than ranks waiting for a peer that never came.
  std::vector<std::unique_ptr<train::GemmBackend>> gemms(n);
  if (inputs.make_gemm) {
    for (size_t i = 0; i < n; ++i) {
      const int world_rank = endpoints[i]->world_ranks()[static_cast<size_t>(endpoints[i]->rank())];
      absl::StatusOr<std::unique_ptr<train::GemmBackend>> made = inputs.make_gemm(world_rank);
      if (!made.ok()) {
        return absl::Status(made.status().code(), absl::StrCat("rank ", world_rank, ": ", made.status().message()));
      }
      gemms[i] = std::move(*made);
    }
  }
  // The first step no rank starts (set by the first rank that sees a cancellation, at the step
  // after its own: no rank can be a whole step ahead of another, so every rank ends the same).
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  std::atomic<std::int64_t> stop_at{kNever};
  auto rank_body = [&](size_t i) {
    std::optional<train::ScopedGemm> gemm_scope;
    if (gemms[i] != nullptr) gemm_scope.emplace(*gemms[i]);
    RankRunner runner(inputs, *endpoints[i]);
    absl::Status st = runner.Setup();
    if (st.ok() && inputs.schedule.overlapping_iterations()) {
      // No flush between iterations: the whole schedule at once.
      std::vector<TaskTime> times;
      auto recs = runner.RunWhole(&times);
      if (recs.ok()) {
        results[i].steps = *std::move(recs);
        results[i].last_step_tasks = std::move(times);
        Totals(runner.totals(), endpoints[i]->size(), results[i]);
      } else {
        st = recs.status();
      }
    }
    for (std::int64_t step = 0; st.ok() && !inputs.schedule.overlapping_iterations() && step < inputs.train.steps;
         ++step) {
      if (inputs.cancelled && inputs.cancelled()) {
        std::int64_t never = kNever;
        stop_at.compare_exchange_strong(never, step + 1);
      }
      if (step >= stop_at.load()) {
        st = absl::CancelledError(absl::StrCat("training interrupted after ", step, " of ", inputs.train.steps, " steps"));
        break;
      }
      std::vector<TaskTime> times;
      const bool last = step + 1 == inputs.train.steps;
      auto rec = runner.Step(step, last ? &times : nullptr);
      if (!rec.ok()) {
        st = rec.status();
        break;
      }
      results[i].steps.push_back(*rec);
      if (last) {
        results[i].last_step_tasks = std::move(times);
        Totals(runner.totals(), endpoints[i]->size(), results[i]);
      }
    }
    if (st.ok()) st = runner.Evaluate(results[i]);
    std::lock_guard<std::mutex> lock(mu);
    status[i] = st.ok() ? st : absl::Status(st.code(), absl::StrCat("rank ", endpoints[i]->rank(), ": ", st.message()));
  };
  // An exception (out of memory above all) fails its rank, not the process.
  auto body = [&](size_t i) {
    try {
      rank_body(i);
    } catch (const std::bad_alloc&) {
      std::lock_guard<std::mutex> lock(mu);
      status[i] = absl::ResourceExhaustedError(absl::StrCat("rank ", endpoints[i]->rank(), ": out of memory"));
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      status[i] = absl::InternalError(absl::StrCat("rank ", endpoints[i]->rank(), ": exception: ", e.what()));
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back(body, i);
  body(0);
  for (auto& t : threads) t.join();
  // A rank's own failure, before the deadlines it caused its peers.
  for (const absl::Status& s : status) {
    if (!s.ok() && s.code() != absl::StatusCode::kDeadlineExceeded) return s;
  }
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  ExecutionResult out = std::move(results[0]);
  for (size_t i = 1; i < n; ++i) {
    out.last_step_tasks.insert(out.last_step_tasks.end(), results[i].last_step_tasks.begin(),
                               results[i].last_step_tasks.end());
  }
  return out;
}

}  // namespace testbed::exec
