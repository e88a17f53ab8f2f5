// PipeDream-2BW on real ranks (a schedule whose iterations overlap): a stage keeps two versions
// of its weights, the newest, which new forwards use, and the one the micro-batches still in
// flight ran their forward on, which their backward must use; and it keeps the gradients of
// one iteration apart from the next one's while that iteration's exchange and update are
// still to come (the next iteration's backwards have started by then).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "testbed/schedule.h"
#include "testbed/train/param.h"

namespace testbed::exec {

class WeightVersions {
 public:
  // `params`: this rank's parameters; `versions`: how many the schedule keeps (1: none stashed,
  // gradients not set aside: the executor's flushed schedules).
  void Setup(std::vector<train::Param<float>*> params, int versions);
  [[nodiscard]] bool active() const noexcept { return versions_ > 1; }

  // Before a compute task of `iteration`: a forward runs on the newest weights (and fixes them
  // as that iteration's); a backward or recompute on the version its forward used, swapped in
  // from the stash until Leave. Before a backward, the previous iteration's gradients are set
  // aside. FailedPrecondition when the version needed is no longer held.
  [[nodiscard]] absl::Status Enter(int iteration, Phase phase);
  void Leave();
  // Runs `f` with the parameters' gradients being those of `iteration`.
  [[nodiscard]] absl::Status WithGradientsOf(int iteration, const std::function<absl::Status()>& f);
  // Before the optimizer step that makes a new version: keeps a copy of the newest weights for
  // the micro-batches in flight. After it: the step's gradients are spent.
  void BeforeStep();
  void AfterStep(int iteration);

  // Bytes of the stashed weights and the gradients set aside at their most (this rank).
  [[nodiscard]] std::int64_t peak_stash_bytes() const noexcept { return peak_stash_bytes_; }
  [[nodiscard]] std::int64_t peak_held_gradient_bytes() const noexcept { return peak_held_bytes_; }

 private:
  void SwapValues();
  void NotePeaks();

  std::vector<train::Param<float>*> params_;
  int versions_ = 1;
  int live_ = 0;        // updates applied so far: the version the newest weights are
  int stashed_ = -1;    // the version in stash_ (-1: none)
  bool swapped_ = false;
  std::vector<train::Matrix<float>> stash_;
  std::map<int, int> version_of_;  // iteration -> the version its forwards used
  int accumulating_ = -1;          // the iteration whose gradients the parameters hold (-1: none)
  std::map<int, std::vector<train::Matrix<float>>> held_;  // gradients set aside, by iteration
  std::int64_t peak_stash_bytes_ = 0, peak_held_bytes_ = 0;
};

}  // namespace testbed::exec
