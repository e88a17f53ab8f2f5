#include "exec/param_shards.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::exec {

void ParamShards::Build(train::SequentialModel<float>& model, const std::vector<int>& layers, int dp, int dp_rank,
                        const std::vector<std::vector<double>>& shares) {
  shards_.clear();
  if (dp < 2) return;
  for (int l : layers) {
    std::vector<train::Param<float>*> full;
    std::int64_t total = 0;
    for (train::Param<float>* p : model.layer(l).Params()) {
      full.push_back(p);
      total += p->size();
    }
    if (total == 0) continue;
    const std::vector<double> row =
        static_cast<size_t>(l) < shares.size() && !shares[static_cast<size_t>(l)].empty() ? shares[static_cast<size_t>(l)]
                                                                                          : std::vector<double>{1.0};
    // Piece c: from the rounded sum of the shares before it to the rounded sum with it.
    double cumulative = 0;
    std::int64_t begin = 0;
    for (size_t c = 0; c < row.size(); ++c) {
      cumulative += row[c];
      const std::int64_t end =
          c + 1 == row.size() ? total : std::min(total, static_cast<std::int64_t>(std::llround(cumulative * static_cast<double>(total))));
      if (end <= begin) continue;
      auto s = std::make_unique<Shard>();
      s->layer = l;
      s->piece = static_cast<int>(c);
      s->full = full;
      s->begin = begin;
      s->end = end;
      const std::int64_t n = end - begin;
      // As even as it goes: the first n % dp members one element more.
      for (int r = 0; r < dp; ++r) s->counts.push_back(n / dp + (r < n % dp ? 1 : 0));
      for (int r = 0; r < dp_rank; ++r) s->offset += s->counts[static_cast<size_t>(r)];
      const std::int64_t mine = s->counts[static_cast<size_t>(dp_rank)];
      const std::vector<float> flat = Flatten(*s, false);
      train::Matrix<float> part(1, mine);
      std::copy(flat.begin() + s->offset, flat.begin() + s->offset + mine, part.data());
      s->part = train::Param<float>(row.size() == 1 ? absl::StrCat("layer", l, ".zero_shard")
                                                    : absl::StrCat("layer", l, ".piece", c, ".zero_shard"),
                                    std::move(part));
      shards_.push_back(std::move(s));
      begin = end;
    }
  }
}

std::vector<train::Param<float>*> ParamShards::Params() {
  std::vector<train::Param<float>*> out;
  for (auto& s : shards_) out.push_back(&s->part);
  return out;
}

ParamShards::Shard* ParamShards::Find(int layer, int piece) {
  for (auto& s : shards_) {
    if (s->layer == layer && s->piece == piece) return s.get();
  }
  return nullptr;
}

std::vector<float> ParamShards::Flatten(const Shard& s, bool gradients) const {
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(s.end - s.begin));
  std::int64_t at = 0;
  for (const train::Param<float>* p : s.full) {
    const train::Matrix<float>& m = gradients ? p->grad : p->value;
    const std::int64_t a = std::max(at, s.begin), b = std::min(at + p->size(), s.end);
    if (a < b) flat.insert(flat.end(), m.data() + (a - at), m.data() + (b - at));
    at += p->size();
  }
  return flat;
}

absl::Status ParamShards::Gather(CommGroup& group, int layer, int piece) {
  Shard* s = Find(layer, piece);
  if (s == nullptr) return absl::OkStatus();
  if (group.size() != static_cast<int>(s->counts.size())) {
    return absl::InternalError(absl::StrCat("layer ", layer, " is sharded ", s->counts.size(), " ways, the gather's group has ",
                                            group.size(), " members"));
  }
  std::vector<float> flat(static_cast<size_t>(s->end - s->begin));
  TESTBED_RETURN_IF_ERROR(group.AllGatherV(s->part.value.data(), flat.data(), s->counts, DataType::kFloat32));
  std::int64_t at = 0;
  for (train::Param<float>* p : s->full) {
    const std::int64_t a = std::max(at, s->begin), b = std::min(at + p->size(), s->end);
    if (a < b) {
      std::copy(flat.begin() + (a - s->begin), flat.begin() + (b - s->begin), p->value.data() + (a - at));
    }
    at += p->size();
  }
  return absl::OkStatus();
}

absl::Status ParamShards::GatherRange(CommGroup& group, int first, int end) {
  for (auto& s : shards_) {
    if (s->layer >= first && s->layer < end) TESTBED_RETURN_IF_ERROR(Gather(group, s->layer, s->piece));
  }
  return absl::OkStatus();
}

absl::Status ParamShards::GatherAll(CommGroup& group) {
  for (auto& s : shards_) TESTBED_RETURN_IF_ERROR(Gather(group, s->layer, s->piece));
  return absl::OkStatus();
}

absl::StatusOr<double> ParamShards::ReduceScatter(CommGroup& group, int first, int end, int piece) {
  double bytes = 0;
  for (auto& s : shards_) {
    if (s->layer < first || s->layer >= end || s->piece != piece) continue;
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
    // The part covers elements [begin + offset, begin + offset + its size) of the flattened
    // tensors.
    std::int64_t begin = 0;
    const std::int64_t lo = s->begin + s->offset, hi = lo + s->part.size();
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
