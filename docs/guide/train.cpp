// A training loop: a DataLoader, a loss, an optimizer with a schedule, evaluation without autograd.
#include <ember/ember.h>

#include <cstdio>
#include <memory>

using namespace ember;

int main() {
  manual_seed(0);
  // A toy problem: which of 4 clusters a point comes from.
  Tensor centers = randn({4, 8}) * 1.5;
  Tensor labels = randint(0, 4, {2048});
  Tensor points = index_select(centers, 0, labels) + randn({2048, 8});
  auto train_set = std::make_shared<data::TensorDataset>(points.narrow(0, 0, 1536), labels.narrow(0, 0, 1536));
  auto test_set = std::make_shared<data::TensorDataset>(points.narrow(0, 1536, 512), labels.narrow(0, 1536, 512));
  data::DataLoader train(train_set, data::DataLoaderOptions().batch_size(64).shuffle(true).seed(0));
  data::DataLoader test(test_set, data::DataLoaderOptions().batch_size(256));

  nn::Sequential model;
  model.add<nn::Linear>(8, 32);
  model.add<nn::ReLU>();
  model.add<nn::Linear>(32, 4);

  const int epochs = 5;
  optim::AdamW optimizer(model.parameters(), optim::AdamWOptions(1e-2).weight_decay(1e-4));
  optim::CosineAnnealingLR schedule(optimizer, epochs * train.size());

  double accuracy = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    model.train();
    for (data::Batch& batch : train) {  // each pass over the loader is one epoch, reshuffled
      Tensor loss = cross_entropy(model(batch.data), batch.target);
      optimizer.zero_grad();
      loss.backward();
      optim::clip_grad_norm_(model.parameters(), 1.0);
      optimizer.step();
      schedule.step();
    }
    model.eval();
    NoGradGuard no_grad;  // evaluation records no graph
    int64_t correct = 0;
    for (data::Batch& batch : test) correct += sum(eq(argmax(model(batch.data), 1), batch.target)).item<int64_t>();
    accuracy = static_cast<double>(correct) / 512.0;
    std::printf("epoch %d: test accuracy %.3f, lr %.5f\n", epoch + 1, accuracy, optimizer.group_lr(0));
  }
  EMBER_CHECK(accuracy > 0.9, "the toy problem should be learnt, accuracy ", accuracy);
  return 0;
}
