#include "exec/param_shards.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::exec {

void ParamShards::Build(train::SequentialModel<float>& model, const std::vector<int>& layers, int dp, int dp_rank) {
  shards_.clear();
  if (dp < 2) return;
  for (int l : layers) {
    auto s = std::make_unique<Shard>();
    s->layer = l;
    std::int64_t total = 0;
    for (train::Param<float>* p : model.layer(l).Params()) {
      s->full.push_back(p);
      total += p->size();
    }
    if (total == 0) continue;
    // As even as it goes: the first total % dp members one element more.
    for (int r = 0; r < dp; ++r) s->counts.push_back(total / dp + (r < total % dp ? 1 : 0));
    for (int r = 0; r < dp_rank; ++r) s->offset += s->counts[static_cast<size_t>(r)];
    const std::int64_t mine = s->counts[static_cast<size_t>(dp_rank)];
    const std::vector<float> flat = Flatten(*s, false);
    train::Matrix<float> part(1, mine);
    std::copy(flat.begin() + s->offset, flat.begin() + s->offset + mine, part.data());
    s->part = train::Param<float>(absl::StrCat("layer", l, ".zero_shard"), std::move(part));
    shards_.push_back(std::move(s));
  }
}

std::vector<train::Param<float>*> ParamShards::Params() {
  std::vector<train::Param<float>*> out;
  for (auto& s : shards_) out.push_back(&s->part);
  return out;
}

ParamShards::Shard* ParamShards::Find(int layer) {
  for (auto& s : shards_) {
    if (s->layer == layer) return s.get();
  }
  return nullptr;
}

std::vector<float> ParamShards::Flatten(const Shard& s, bool gradients) const {
  std::vector<float> flat;
  for (const train::Param<float>* p : s.full) {
    const train::Matrix<float>& m = gradients ? p->grad : p->value;
    flat.insert(flat.end(), m.data(), m.data() + m.size());
  }
  return flat;
}

absl::Status ParamShards::Gather(CommGroup& group, int layer) {
  Shard* s = Find(layer);
  if (s == nullptr) return absl::OkStatus();
  if (group.size() != static_cast<int>(s->counts.size())) {
    return absl::InternalError(absl::StrCat("layer ", layer, " is sharded ", s->counts.size(), " ways, the gather's group has ",
                                            group.size(), " members"));
  }
  std::int64_t total = 0;
  for (std::int64_t c : s->counts) total += c;
  std::vector<float> flat(static_cast<size_t>(total));
  TESTBED_RETURN_IF_ERROR(group.AllGatherV(s->part.value.data(), flat.data(), s->counts, DataType::kFloat32));
  size_t at = 0;
  for (train::Param<float>* p : s->full) {
    std::copy(flat.begin() + static_cast<std::ptrdiff_t>(at), flat.begin() + static_cast<std::ptrdiff_t>(at + p->size()),
              p->value.data());
    at += static_cast<size_t>(p->size());
  }
  return absl::OkStatus();
}

absl::Status ParamShards::GatherAll(CommGroup& group) {
  for (auto& s : shards_) TESTBED_RETURN_IF_ERROR(Gather(group, s->layer));
  return absl::OkStatus();
}

absl::StatusOr<double> ParamShards::ReduceScatter(CommGroup& group, int first, int end) {
  double bytes = 0;
  for (auto& s : shards_) {
    if (s->layer < first || s->layer >= end) continue;
    const std::vector<float> flat = Flatten(*s, true);
    std::vector<float> mine(static_cast<size_t>(s->part.size()));
    TESTBED_RETURN_IF_ERROR(group.ReduceScatterV(flat.data(), mine.data(), s->counts, DataType::kFloat32, ReduceOp::kSum));
    for (size_t i = 0; i < mine.size(); ++i) s->part.grad.data()[i] += mine[i];
    bytes += static_cast<double>(flat.size()) * sizeof(float);
  }
  return bytes;
}

double ParamShards::GradSq(const std::function<bool(const std::string&)>& counted) const {
  double sum = 0;
  for (const auto& s : shards_) {
    // The part covers elements [offset, offset + its size) of the flattened tensors.
    std::int64_t begin = 0;
    const std::int64_t lo = s->offset, hi = s->offset + s->part.size();
    for (const train::Param<float>* p : s->full) {
      const std::int64_t end = begin + p->size();
      const std::int64_t a = std::max(begin, lo), b = std::min(end, hi);
      if (a < b && counted(p->name)) {
        for (std::int64_t i = a; i < b; ++i) {
          const double g = s->part.grad.data()[i - lo];
          sum += g * g;
        }
      }
      begin = end;
    }
  }
  return sum;
}

void ParamShards::AfterStep() {
  for (auto& s : shards_) {
    s->part.ZeroGrad();
    for (train::Param<float>* p : s->full) {
      p->ZeroGrad();
      p->value.setConstant(std::numeric_limits<float>::quiet_NaN());
    }
  }
}

}  // namespace testbed::exec
