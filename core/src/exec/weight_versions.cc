#include "exec/weight_versions.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace testbed::exec {

void WeightVersions::Setup(std::vector<train::Param<float>*> params, int versions) {
  params_ = std::move(params);
  versions_ = versions;
}

void WeightVersions::SwapValues() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i]->value.swap(stash_[i]);
  swapped_ = !swapped_;
}

void WeightVersions::NotePeaks() {
  std::int64_t stash = 0, held = 0;
  for (const auto& m : stash_) stash += static_cast<std::int64_t>(m.size()) * static_cast<std::int64_t>(sizeof(float));
  for (const auto& [it, grads] : held_) {
    for (const auto& m : grads) held += static_cast<std::int64_t>(m.size()) * static_cast<std::int64_t>(sizeof(float));
  }
  peak_stash_bytes_ = std::max(peak_stash_bytes_, stash);
  peak_held_bytes_ = std::max(peak_held_bytes_, held);
}

absl::Status WeightVersions::Enter(int iteration, Phase phase) {
  if (!active()) return absl::OkStatus();
  auto known = version_of_.find(iteration);
  if (phase == Phase::kForward) {
    if (known == version_of_.end()) {
      version_of_[iteration] = live_;
      // Versions older than the stash are gone for good: forget which iterations used them.
      while (!version_of_.empty() && version_of_.begin()->second < live_ - 1) version_of_.erase(version_of_.begin());
      return absl::OkStatus();
    }
    if (known->second == live_) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "a forward of iteration ", iteration, " after an update: its other forwards ran on weight version ",
        known->second, ", the stage now holds version ", live_,
        " (weight versions follow iterations here; a schedule that updates between an iteration's forwards, such "
        "as pipedream_2bw with update = \"at_last_backward\", runs in the simulator only)"));
  }
  if (known == version_of_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("a ", phase == Phase::kBackward ? "backward" : "recompute",
                                                      " of iteration ", iteration, " before any of its forwards"));
  }
  const int needed = known->second;
  if (needed != live_) {
    if (needed != stashed_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "iteration ", iteration, " needs weight version ", needed, ", but the stage keeps ", versions_,
          " versions (", live_, stashed_ >= 0 ? absl::StrCat(" and ", stashed_) : "", ")"));
    }
    SwapValues();
  }
  if (phase == Phase::kBackward && accumulating_ != iteration) {
    if (accumulating_ >= 0) {
      // The previous iteration's gradients wait apart for their exchange and step.
      std::vector<train::Matrix<float>>& aside = held_[accumulating_];
      aside.clear();
      for (train::Param<float>* p : params_) {
        aside.push_back(train::Matrix<float>::Zero(p->grad.rows(), p->grad.cols()));
        aside.back().swap(p->grad);
      }
      NotePeaks();
    }
    accumulating_ = iteration;
  }
  return absl::OkStatus();
}

void WeightVersions::Leave() {
  if (swapped_) SwapValues();
}

absl::Status WeightVersions::WithGradientsOf(int iteration, const std::function<absl::Status()>& f) {
  if (!active() || iteration == accumulating_) return f();
  auto it = held_.find(iteration);
  if (it == held_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("no gradients of iteration ", iteration, " on this stage"));
  }
  auto swap = [&] {
    for (size_t i = 0; i < params_.size(); ++i) params_[i]->grad.swap(it->second[i]);
  };
  swap();
  absl::Status st = f();
  swap();
  return st;
}

void WeightVersions::BeforeStep() {
  if (!active()) return;
  stash_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) stash_[i] = params_[i]->value;
  stashed_ = live_;
  NotePeaks();
}

void WeightVersions::AfterStep(int iteration) {
  if (!active()) return;
  ++live_;
  if (iteration == accumulating_) {
    accumulating_ = -1;
  } else {
    held_.erase(iteration);
  }
}

}  // namespace testbed::exec
