// Training-step throughput of the training engine on one core: a full step (forward,
// cross-entropy, backward, Adam) of the tiny GPT on random tokens, and of the MLP on a
// digits-sized batch. Reported as tokens (samples) per second.
#include <benchmark/benchmark.h>

#include "testbed/train/adam.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/mlp_classifier.h"
#include "testbed/train/tiny_gpt.h"

namespace {

using namespace testbed::train;

template <typename Model>
void Step(Model& model, Adam<float>& adam, const Matrix<float>& x, const std::vector<std::int64_t>& labels) {
  model.ZeroGrad();
  std::vector<LayerCache<float>> caches;
  auto logits = model.Forward(x, caches);
  auto loss = SoftmaxCrossEntropy(*logits, labels);
  (void)model.Backward(loss->dlogits, caches);
  adam.Step(model.Params());
  benchmark::DoNotOptimize(loss->loss);
}

void BM_TinyGptTrainStep(benchmark::State& state) {
  TinyGptConfig config{.vocab = 76, .seq_len = state.range(1), .dim = state.range(0), .heads = 4, .layers = 2};
  const std::int64_t batch = 8;
  auto model = TinyGpt<float>::Create(config);
  Adam<float> adam(AdamOptions{});
  Rng rng(1);
  std::vector<std::int64_t> tokens, targets;
  for (std::int64_t i = 0; i < batch * config.seq_len; ++i) {
    tokens.push_back(static_cast<std::int64_t>(rng.Below(76)));
    targets.push_back(static_cast<std::int64_t>(rng.Below(76)));
  }
  const Matrix<float> x = IdsToColumn<float>(tokens);
  for (auto _ : state) Step(*model, adam, x, targets);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["params"] = static_cast<double>(model->NumParameters());
}
BENCHMARK(BM_TinyGptTrainStep)->ArgNames({"dim", "seq"})->Args({64, 64})->Args({128, 64})->Unit(benchmark::kMillisecond);

void BM_MlpTrainStep(benchmark::State& state) {
  auto model = MlpClassifier<float>::Create(MlpConfig{.inputs = 64, .hidden = {64, 64}, .classes = 10});
  Adam<float> adam(AdamOptions{});
  const std::int64_t batch = state.range(0);
  Rng rng(2);
  Matrix<float> x(batch, 64);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.Uniform());
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < batch; ++i) labels.push_back(static_cast<std::int64_t>(rng.Below(10)));
  for (auto _ : state) Step(*model, adam, x, labels);
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(batch) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpTrainStep)->ArgName("batch")->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
