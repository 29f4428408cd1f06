// End to end on the real data: the example MLP trained for one epoch on the first 10,000
// Fashion-MNIST training images reaches at least 80% accuracy on the 10,000 test images.
#include <gtest/gtest.h>

#include <filesystem>

#include "examples/models.h"
#include "examples/training.h"
#include "optim/sgd.h"

using namespace ember;

TEST(Training, MlpLearnsFashionMnistInOneEpochOfTenThousandImages) {
  examples::TrainConfig config;
  config.epochs = 1;
  config.train_limit = 10000;
  config.batch_size = 32;
  config.lr = 0.02;
  config.seed = 3;
  config.csv = (std::filesystem::temp_directory_path() / "ember_test_training.csv").string();
  const Device device = examples::setup(config);
  examples::Loaders data = examples::fashion_mnist_loaders(config, /*augment=*/false);
  examples::MLP model(0.2);
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(config.lr).momentum(0.9));
  optim::CosineAnnealingLR schedule(optimizer, data.train->size());
  // Measured over seeds 1-5 with these settings: 81.5% to 81.9%.
  examples::RunResult r = examples::fit(model, [&](const Tensor& x) { return model(x); }, optimizer, &schedule,
                                        *data.train, *data.test, config, "test_training");
  EXPECT_EQ(data.train->size(), 10000 / 32 + 1);
  EXPECT_EQ(data.test->dataset().size(), 10000);
  EXPECT_GE(r.test_acc, 0.80);
  EXPECT_GT(r.peak_bytes, 0);
  EXPECT_EQ(r.epochs, 1);
  EXPECT_TRUE(device.is_cpu());
}
