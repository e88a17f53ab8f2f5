#include "exec/gnn_stack.h"

#include <cmath>
#include <span>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::exec {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

absl::StatusOr<GnnStack> GnnStack::Build(const ModelShape& shape, std::int64_t inputs, std::int64_t classes,
                                         std::uint64_t seed) {
  const auto hops = static_cast<std::int64_t>(shape.fanouts.size());
  if (hops < 1) return absl::InvalidArgumentError("[model] a gnn needs at least one fanout");
  if (inputs < 1 || classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat("[model] a gnn needs inputs >= 1 and at least 2 classes (got ",
                                                   inputs, " inputs, ", classes, " classes)"));
  }
  const bool gat = shape.gnn_layer == "gat";
  const std::int64_t heads = gat ? std::max<std::int64_t>(1, shape.heads) : 1;
  if (hops > 1 && (shape.hidden < 1 || shape.hidden % heads != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("[model] hidden = ", shape.hidden, " must be >= 1",
                                                   gat ? absl::StrCat(" and divisible by heads = ", heads) : ""));
  }
  GnnStack s;
  s.elu_ = gat;
  train::Rng rng(seed);
  for (std::int64_t i = 0; i < hops; ++i) {
    const std::int64_t in = i == 0 ? inputs : shape.hidden;
    const bool last = i == hops - 1;
    const std::string name = absl::StrCat(shape.gnn_layer, i);
    if (shape.gnn_layer == "sage") {
      s.layers_.emplace_back(std::in_place_type<train::SageMeanLayer<float>>, name, in, last ? classes : shape.hidden, rng);
    } else if (shape.gnn_layer == "gcn") {
      s.layers_.emplace_back(std::in_place_type<train::GcnLayer<float>>, name, in, last ? classes : shape.hidden, rng);
    } else if (gat) {
      s.layers_.emplace_back(std::in_place_type<train::GatLayer<float>>, name, in, last ? classes : shape.hidden / heads,
                             last ? 1 : heads, last ? train::GatCombine::kMean : train::GatCombine::kConcat, rng);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("[model] gnn_layer = \"", shape.gnn_layer,
                                                     "\": expected sage, gcn or gat"));
    }
  }
  s.caches_.resize(static_cast<size_t>(hops));
  s.pre_.resize(static_cast<size_t>(hops));
  return s;
}

absl::StatusOr<train::Matrix<float>> GnnStack::Forward(const train::Matrix<float>& x, const train::SampledBatch& batch,
                                                       const std::vector<std::int64_t>& degrees) {
  const size_t hops = layers_.size();
  if (batch.blocks.size() != hops) {
    return absl::InvalidArgumentError(absl::StrCat("a batch of ", batch.blocks.size(), " hops for ", hops, " layers"));
  }
  train::Matrix<float> h = x;
  for (size_t i = 0; i < hops; ++i) {
    const train::Csr& block = batch.blocks[hops - 1 - i];
    const std::vector<std::int64_t>& rows = batch.hops[hops - i];  // the vertices of h's rows
    train::LayerCache<float>& cache = caches_[i];
    cache.Clear();
    absl::StatusOr<train::Matrix<float>> y = std::visit(
        Overloaded{[&](train::GcnLayer<float>& l) {
                     std::vector<std::int64_t> d(rows.size());
                     for (size_t j = 0; j < rows.size(); ++j) d[j] = degrees[static_cast<size_t>(rows[j])];
                     return l.Forward(h, block, d, cache);
                   },
                   [&](auto& l) { return l.Forward(h, block, cache); }},
        layers_[i]);
    if (!y.ok()) return y.status();
    if (i + 1 == hops) return *std::move(y);
    pre_[i] = *std::move(y);
    h = elu_ ? train::Matrix<float>(pre_[i].unaryExpr([](float v) { return v > 0 ? v : std::expm1(v); }))
             : train::Matrix<float>(pre_[i].cwiseMax(0.0f));
  }
  return h;
}

absl::Status GnnStack::Backward(const train::Matrix<float>& dlogits) {
  train::Matrix<float> dy = dlogits;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (i + 1 < layers_.size()) {
      // Through the nonlinearity after layer i.
      const train::Matrix<float>& p = pre_[i];
      if (elu_) {
        dy.array() *= p.unaryExpr([](float v) { return v > 0 ? 1.0f : std::exp(v); }).array();
      } else {
        dy.array() *= (p.array() > 0).cast<float>();
      }
    }
    const train::LayerCache<float>& cache = caches_[i];
    absl::StatusOr<train::Matrix<float>> dx =
        std::visit([&](auto& l) { return l.Backward(dy, cache); }, layers_[i]);
    if (!dx.ok()) return dx.status();
    dy = *std::move(dx);
  }
  return absl::OkStatus();
}

std::vector<train::Param<float>*> GnnStack::Params() {
  std::vector<train::Param<float>*> out;
  for (AnyLayer& l : layers_) {
    for (train::Param<float>* p : std::visit([](auto& layer) { return layer.Params(); }, l)) out.push_back(p);
  }
  return out;
}

}  // namespace testbed::exec
