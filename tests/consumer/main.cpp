// A user's program written against ember, as scripts/test-consumer builds it: it includes only
// the umbrella header and trains a small classifier for a few epochs. It exits non-zero unless
// training worked, which also proves that the kernels registered themselves, i.e. that the
// archives were linked whole (Note [Static archives linked whole] in CMakeLists.txt).
#include <cstdio>
#include <memory>
#include <string>

#include <ember/ember.h>

using namespace ember;

// Two inputs, the label says on which side of the line x0 + 2 x1 = 0 the point lies.
struct Classifier : nn::Module {
  nn::Linear hidden{2, 16}, out{16, 2};
  Classifier() {
    register_module("hidden", hidden);
    register_module("out", out);
  }
  Tensor forward(const Tensor& x) override {
    // Checkpointed, so the consumer also exercises utils/ (recompute in backward).
    Tensor h = utils::checkpoint([this](const Tensor& in) { return relu(hidden(in)); }, x);
    return out(h);
  }
};

// Fraction of the points the classifier labels right.
double accuracy(Classifier& net, const Tensor& points, const Tensor& labels) {
  NoGradGuard no_grad;
  return mean(eq(argmax(net(points), 1), labels).to(kFloat32)).item();
}

int main() {
  // The library linked is the release CMake found (tests/consumer/CMakeLists.txt).
  if (ember::version() != EMBER_FOUND_VERSION) {
    std::printf("consumer: FAILED: linked ember %s, CMake found %s\n", std::string(ember::version()).c_str(),
                EMBER_FOUND_VERSION);
    return 1;
  }
  std::printf("consumer: ember %s\n", std::string(ember::version()).c_str());
  manual_seed(7);
  Tensor points = randn({512, 2});
  Tensor labels = gt(points.select(1, 0) + points.select(1, 1) * 2.0, zeros({512})).to(kInt64);

  Classifier net;
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  data::DataLoader loader(std::make_shared<data::TensorDataset>(points, labels),
                          data::DataLoaderOptions().batch_size(64).shuffle(true).seed(7));

  double first_loss = -1, last_loss = -1;
  for (int epoch = 0; epoch < 5; ++epoch)
    for (data::Batch& batch : loader) {
      Tensor loss = cross_entropy(net(batch.data), batch.target);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (first_loss < 0) first_loss = loss.item();
      last_loss = loss.item();
    }

  const double acc = accuracy(net, points, labels);
  std::printf("consumer: loss %.4f -> %.4f, accuracy %.3f\n", first_loss, last_loss, acc);
  const bool trained = last_loss < 0.5 * first_loss && acc > 0.9;
  std::printf("consumer: %s\n", trained ? "ok" : "FAILED to train");
  return trained ? 0 : 1;
}
