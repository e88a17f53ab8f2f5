// Delayed (asynchronous) SGD's gradient queue: the update of step t applies the gradient
// computed at step t - tau_t, as a parameter server does when a worker's gradient arrives
// tau_t updates after the weights it was computed from were read:
//     w_{t+1} = w_t - lr * g(w_{t - tau_t}).
// tau_t is `max_delay` at every step (fixed), or uniform on {0, ..., max_delay}, drawn for
// each step from (seed, t) alone (random), so that every rank of a data-parallel run draws the
// same delays without talking. While t - tau_t < 0 there is no gradient yet: the step applies
// none (the caller skips the update). With random delays a gradient can be applied at more
// than one step or at none; that is the model the analysis assumes (the delay of each update
// is what is bounded).
//
// The queue holds the last max_delay + 1 gradients of every parameter (max_delay + 1 copies
// of the model's gradients). With max_delay = 0 it hands back the gradient it was given.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "testbed/train/param.h"

namespace testbed::train {

struct DelayOptions {
  int max_delay = 0;   // tau, in steps (>= 0)
  bool random = false;  // false: every update is tau steps stale; true: uniform on {0..tau}
  std::uint64_t seed = 1;
};

// The delay tau_t of step `step` under `options` (a pure function of its arguments).
[[nodiscard]] int DelayOfStep(const DelayOptions& options, std::int64_t step) noexcept;

template <typename T>
class DelayedGradients {
 public:
  explicit DelayedGradients(DelayOptions options) : options_(options) {}

  // Step t (the calls are numbered from 0): records each parameter's grad as step t's and
  // replaces it with the gradient of step t - tau_t. Returns tau_t, or nullopt (and zeroes the
  // grads) when t - tau_t < 0: no gradient to apply yet. `params` must be the same list, in
  // the same order, at every call.
  [[nodiscard]] std::optional<int> Exchange(const std::vector<Param<T>*>& params);

  [[nodiscard]] std::int64_t steps() const noexcept { return step_; }

 private:
  DelayOptions options_;
  std::int64_t step_ = 0;
  std::deque<std::vector<Matrix<T>>> history_;  // oldest first; back() is the latest step
};

}  // namespace testbed::train
