// Training for real: a few optimizer steps on the shipped data sets lower the loss; the
// per-layer / per-micro-batch interface an executor uses gives the same gradients as one
// whole-batch pass; runs are bitwise reproducible for a seed.
#include <cmath>
#include <iostream>
#include <numeric>

#include <gtest/gtest.h>

#include "testbed/train/adam.h"
#include "testbed/train/batcher.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/labeled_data.h"
#include "testbed/train/mlp_classifier.h"
#include "testbed/train/sgd.h"
#include "testbed/train/tiny_gpt.h"

namespace testbed::train {
namespace {

const std::string kDigits = std::string(TESTBED_DATA_DIR) + "/digits/digits.csv.gz";
const std::string kText = std::string(TESTBED_DATA_DIR) + "/text/gpl-3.0.txt";

template <typename T>
absl::StatusOr<double> Step(SequentialModel<T>& model, Optimizer<T>& opt, const Matrix<T>& x,
                            const std::vector<std::int64_t>& labels) {
  model.ZeroGrad();
  std::vector<LayerCache<T>> caches;
  auto logits = model.Forward(x, caches);
  if (!logits.ok()) return logits.status();
  auto loss = SoftmaxCrossEntropy(*logits, labels);
  if (!loss.ok()) return loss.status();
  auto back = model.Backward(loss->dlogits, caches);
  if (!back.ok()) return back.status();
  opt.Step(model.Params());
  return loss->loss;
}

template <typename T>
double Evaluate(SequentialModel<T>& model, const Matrix<T>& x, const std::vector<std::int64_t>& labels,
                double* accuracy) {
  std::vector<LayerCache<T>> caches;
  auto logits = model.Forward(x, caches);
  EXPECT_TRUE(logits.ok());
  if (accuracy != nullptr) *accuracy = Accuracy(*logits, labels);
  return SoftmaxCrossEntropy(*logits, labels)->loss;
}

double Mean(const std::vector<double>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(end), 0.0) /
         static_cast<double>(end - begin);
}

// For the log: how far training got.
void Report(const char* what, const std::vector<double>& losses, size_t window) {
  std::cout << what << ": mean loss of the first " << window << " steps " << Mean(losses, 0, window) << ", of the last "
            << window << " steps " << Mean(losses, losses.size() - window, losses.size()) << "\n";
}

std::vector<double> TrainMlp(Optimizer<float>& opt, int steps, double* val_loss_before, double* val_loss_after,
                             double* val_accuracy) {
  auto data = LoadDigits(kDigits);
  EXPECT_TRUE(data.ok()) << data.status();
  auto [train, val] = SplitTrainValidation(*data, 0.2, 5);
  auto model = MlpClassifier<float>::Create(MlpConfig{.inputs = 64, .hidden = {32}, .classes = 10, .seed = 2});
  EXPECT_TRUE(model.ok());
  *val_loss_before = Evaluate(*model, val.features, val.labels, nullptr);
  Batcher batcher(train.size(), 64, 7);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    LabeledData batch = train.Rows(batcher.Next());
    auto loss = Step<float>(*model, opt, batch.features, batch.labels);
    EXPECT_TRUE(loss.ok()) << loss.status();
    losses.push_back(*loss);
  }
  *val_loss_after = Evaluate(*model, val.features, val.labels, val_accuracy);
  return losses;
}

TEST(Training, MlpOnDigitsWithSgdMomentumLearns) {
  Sgd<float> sgd(SgdOptions{.learning_rate = 0.1, .momentum = 0.9});
  double before = 0, after = 0, accuracy = 0;
  const std::vector<double> losses = TrainMlp(sgd, 60, &before, &after, &accuracy);
  Report("mlp sgd", losses, 10);
  std::cout << "mlp sgd: validation loss " << before << " -> " << after << ", accuracy " << accuracy << "\n";
  EXPECT_LT(Mean(losses, 50, 60), Mean(losses, 0, 10));
  EXPECT_LT(after, before);
  EXPECT_GT(accuracy, 0.5) << "ten classes: chance is 0.1";
}

TEST(Training, MlpOnDigitsWithAdamLearns) {
  Adam<float> adam(AdamOptions{.learning_rate = 3e-3});
  double before = 0, after = 0, accuracy = 0;
  const std::vector<double> losses = TrainMlp(adam, 40, &before, &after, &accuracy);
  Report("mlp adam", losses, 10);
  std::cout << "mlp adam: validation loss " << before << " -> " << after << ", accuracy " << accuracy << "\n";
  EXPECT_LT(Mean(losses, 30, 40), Mean(losses, 0, 10));
  EXPECT_LT(after, before);
}

std::vector<double> TrainGpt(Optimizer<float>& opt, int steps, std::uint64_t seed, std::vector<float>* final_weights) {
  auto corpus = CharCorpus::Load(kText);
  EXPECT_TRUE(corpus.ok()) << corpus.status();
  TinyGptConfig config{.vocab = corpus->vocab_size(), .seq_len = 16, .dim = 32, .heads = 4, .layers = 2, .seed = seed};
  auto model = TinyGpt<float>::Create(config);
  EXPECT_TRUE(model.ok()) << model.status();
  Rng rng(seed);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    auto batch = CharCorpus::Sample(corpus->train(), 8, config.seq_len, rng);
    EXPECT_TRUE(batch.ok());
    auto loss = Step<float>(*model, opt, IdsToColumn<float>(batch->inputs), batch->targets);
    EXPECT_TRUE(loss.ok()) << loss.status();
    losses.push_back(*loss);
  }
  if (final_weights != nullptr) {
    for (Param<float>* p : model->Params()) final_weights->insert(final_weights->end(), p->value.data(), p->value.data() + p->value.size());
  }
  return losses;
}

TEST(Training, TinyGptOnTextWithAdamLearns) {
  Adam<float> adam(AdamOptions{.learning_rate = 3e-3});
  const std::vector<double> losses = TrainGpt(adam, 40, 1, nullptr);
  Report("tiny gpt adam", losses, 5);
  auto corpus = CharCorpus::Load(kText);
  // Small initial weights give near-uniform predictions: loss close to log(vocabulary).
  EXPECT_NEAR(losses[0], std::log(static_cast<double>(corpus->vocab_size())), 0.1);
  EXPECT_LT(Mean(losses, 35, 40), Mean(losses, 0, 5));
}

TEST(Training, TinyGptWithSgdLowersTheLoss) {
  Sgd<float> sgd(SgdOptions{.learning_rate = 0.5, .momentum = 0.9});
  const std::vector<double> losses = TrainGpt(sgd, 25, 2, nullptr);
  Report("tiny gpt sgd", losses, 5);
  EXPECT_LT(Mean(losses, 20, 25), Mean(losses, 0, 5));
}

TEST(Training, RunsAreBitwiseReproducible) {
  Adam<float> a(AdamOptions{.learning_rate = 3e-3}), b(AdamOptions{.learning_rate = 3e-3});
  std::vector<float> wa, wb;
  const std::vector<double> la = TrainGpt(a, 5, 3, &wa);
  const std::vector<double> lb = TrainGpt(b, 5, 3, &wb);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(wa, wb);
}

// The executor's view: micro-batches through layer ranges (pipeline stages), gradients
// accumulated, loss normalised by the whole batch. Must equal one whole-batch pass.
TEST(Training, MicroBatchesThroughStagesEqualTheWholeBatch) {
  TinyGptConfig config{.vocab = 13, .seq_len = 6, .dim = 8, .heads = 2, .layers = 3, .seed = 4};
  auto whole = TinyGpt<double>::Create(config);
  ASSERT_TRUE(whole.ok());
  TinyGpt<double> staged = *whole;
  Rng rng(8);
  std::vector<std::int64_t> tokens, targets;
  for (int i = 0; i < 4 * config.seq_len; ++i) {
    tokens.push_back(static_cast<std::int64_t>(rng.Below(13)));
    targets.push_back(static_cast<std::int64_t>(rng.Below(13)));
  }
  std::vector<LayerCache<double>> caches;
  auto logits = whole->Forward(IdsToColumn<double>(tokens), caches);
  auto loss = SoftmaxCrossEntropy(*logits, targets);
  ASSERT_TRUE(whole->Backward(loss->dlogits, caches).ok());

  // Two stages split after the second block; two micro-batches of two sequences; both
  // forwards run before both backwards (GPipe order).
  const int split = 3, end = staged.num_layers();
  const double tokens_total = static_cast<double>(tokens.size());
  const auto half = static_cast<std::ptrdiff_t>(tokens.size() / 2);
  std::vector<std::vector<LayerCache<double>>> first(2), second(2);
  std::vector<LossAndGrad<double>> losses(2);
  double staged_loss = 0;
  for (int mb = 0; mb < 2; ++mb) {
    std::vector<std::int64_t> t(tokens.begin() + mb * half, tokens.begin() + (mb + 1) * half);
    std::vector<std::int64_t> y(targets.begin() + mb * half, targets.begin() + (mb + 1) * half);
    auto h = staged.ForwardRange(0, split, IdsToColumn<double>(t), first[static_cast<size_t>(mb)]);
    ASSERT_TRUE(h.ok());
    auto out = staged.ForwardRange(split, end, *h, second[static_cast<size_t>(mb)]);
    ASSERT_TRUE(out.ok());
    losses[static_cast<size_t>(mb)] = *SoftmaxCrossEntropy(*out, y, tokens_total);
    staged_loss += losses[static_cast<size_t>(mb)].loss;
  }
  for (int mb = 1; mb >= 0; --mb) {
    auto dh = staged.BackwardRange(split, end, losses[static_cast<size_t>(mb)].dlogits, second[static_cast<size_t>(mb)]);
    ASSERT_TRUE(dh.ok());
    ASSERT_TRUE(staged.BackwardRange(0, split, *dh, first[static_cast<size_t>(mb)]).ok());
  }
  EXPECT_NEAR(staged_loss, loss->loss, 1e-12);
  const auto pw = whole->Params(), ps = staged.Params();
  ASSERT_EQ(pw.size(), ps.size());
  for (size_t i = 0; i < pw.size(); ++i) {
    EXPECT_LE((pw[i]->grad - ps[i]->grad).cwiseAbs().maxCoeff(), 1e-12 * (1 + pw[i]->grad.cwiseAbs().maxCoeff()))
        << pw[i]->name;
  }
}

}  // namespace
}  // namespace testbed::train
