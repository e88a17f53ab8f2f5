#include "exec/rank_state.h"

#include "absl/strings/str_cat.h"

namespace testbed::exec {

absl::StatusOr<Tensor> SampleBlocks::Get(int block, int count) const {
  const std::int64_t rows = samples_ * rows_per_sample_;
  auto missing = [&](int b) {
    return absl::InternalError(absl::StrCat("sub-batch ", b, " of ", count_, " is not there yet"));
  };
  if (count == count_) {
    if (!blocks_[static_cast<size_t>(block)]) return missing(block);
    return *blocks_[static_cast<size_t>(block)];
  }
  if (count_ == 1) {
    // Slice block `block` of `count` out of the whole.
    if (!blocks_[0]) return missing(0);
    if (samples_ % count != 0) {
      return absl::InvalidArgumentError(absl::StrCat("a micro-batch of ", samples_, " samples does not split into ", count,
                                                     " equal sub-batches"));
    }
    const std::int64_t per = rows / count;
    return Tensor(blocks_[0]->middleRows(block * per, per));
  }
  if (count == 1) {
    // Join every block.
    Tensor out;
    for (int b = 0; b < count_; ++b) {
      if (!blocks_[static_cast<size_t>(b)]) return missing(b);
      const Tensor& m = *blocks_[static_cast<size_t>(b)];
      if (b == 0) out.resize(rows, m.cols());
      out.middleRows(b * (rows / count_), m.rows()) = m;
    }
    return out;
  }
  return absl::UnimplementedError(absl::StrCat("a tensor held as ", count_, " sub-batches read as ", count));
}

bool RankState::HoldsLayer(int l) const {
  for (int c = 0; c < chunks; ++c) {
    const StageSpec& st = in.plan.Chunk(stage, c);
    if (l >= st.first_layer && l < st.end_layer) return true;
  }
  return false;
}

absl::StatusOr<const Batch*> RankState::DataOf(int iteration) {
  if (!overlapping) return &data;
  auto it = data_of.find(iteration);
  if (it == data_of.end()) {
    const std::int64_t global = in.plan.micro_batch * micro_batches * dp;
    absl::StatusOr<Batch> b = in.data(iteration, global);
    if (!b.ok()) return b.status();
    it = data_of.emplace(iteration, *std::move(b)).first;
  }
  return &it->second;
}

void RankState::AddLoss(int iteration, double loss) {
  if (overlapping) {
    loss_of[static_cast<size_t>(iteration)] += loss;
  } else {
    metrics.loss += loss;
  }
}

void RankState::AddGradSq(int iteration, double sq) {
  if (overlapping) {
    grad_sq_of[static_cast<size_t>(iteration)] += sq;
  } else {
    metrics.grad_sq += sq;
  }
}

}  // namespace testbed::exec
