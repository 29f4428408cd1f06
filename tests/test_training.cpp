// End to end on the real data: the example MLP trained for one epoch on the first 10,000
// Fashion-MNIST training images reaches at least 80% accuracy on the 10,000 test images; and a
// training run saved and resumed is bitwise the run straight through.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>

#include "examples/models.h"
#include "examples/training.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "serialize/safetensors.h"
#include "test_helpers.h"
#include "temp_dir.h"

using namespace ember;
using testutil::expect_error;

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

// Note [Training checkpoints]: the resumed run must be the straight run, bit for bit.
namespace {

namespace fs = std::filesystem;

struct Trained {
  nn::StateDict weights, optimizer;
};

examples::TrainConfig small_config(const std::string& name) {
  examples::TrainConfig config;
  config.train_limit = 256;
  config.batch_size = 64;
  config.lr = 0.02;
  config.seed = 5;
  config.csv = (fs::temp_directory_path() / ("ember_test_" + name + ".csv")).string();
  return config;
}

// train_mlp's setup, with Dropout at 0.5 (the generator matters), augmentation (the loader's
// epoch matters) and a cosine schedule over two epochs (the scheduler matters).
Trained train_small_mlp(const examples::TrainConfig& config) {
  examples::setup(config);
  examples::Loaders data = examples::fashion_mnist_loaders(config, /*augment=*/true);
  examples::MLP model(0.5);
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(config.lr).momentum(0.9));
  optim::CosineAnnealingLR schedule(optimizer, 2 * data.train->size());
  examples::fit(model, [&](const Tensor& x) { return model(x); }, optimizer, &schedule, *data.train, *data.test, config,
                "test_training");
  return {model.state_dict(), optimizer.state_dict()};
}

void expect_same_bits(const nn::StateDict& got, const nn::StateDict& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [key, w] : want) {
    ASSERT_TRUE(got.count(key)) << what << ": no " << key;
    const Tensor g = got.at(key).contiguous(), e = w.contiguous();
    ASSERT_EQ(g.dtype(), e.dtype()) << key;
    ASSERT_EQ(g.shape(), e.shape()) << key;
    EXPECT_EQ(std::memcmp(g.raw_data(), e.raw_data(), g.nbytes()), 0) << what << ": " << key << " differs";
  }
}

// One epoch of train_mlp's model under plain SGD on unaugmented data, for the runs that must stop
// before their first step: `before` holds the weights to compare with afterwards.
struct UntrainedMlp {
  examples::TrainConfig config;
  examples::Loaders data;
  examples::MLP model{0.5};
  optim::SGD optimizer;
  nn::StateDict before;

  explicit UntrainedMlp(const std::string& name)
      : config(set_up(name)),
        data(examples::fashion_mnist_loaders(config, /*augment=*/false)),
        optimizer(model.parameters(), optim::SGDOptions(config.lr)),
        before(model.state_dict()) {}

  void fit(const examples::TrainConfig& c, const examples::Forward& forward) {
    examples::fit(model, forward, optimizer, nullptr, *data.train, *data.test, c, "test_training");
  }

 private:
  static examples::TrainConfig set_up(const std::string& name) {  // before the model draws its weights
    examples::TrainConfig c = small_config(name);
    c.epochs = 1;
    examples::setup(c);
    return c;
  }
};

class Resume : public ::testing::Test {
 protected:
  ember::testing::TempDir temp_;
  const fs::path& dir_ = temp_.dir();
};

}  // namespace

// In float32 and under both autocasts (Note [Mixed-precision training steps]); fp16's checkpoint
// holds the GradScaler's state, its growth tracker counting the first epoch's steps.
TEST_F(Resume, OneEpochSavedAndResumedEqualsTwoEpochsStraight) {
  for (const std::string amp : {"none", "bf16", "fp16"}) {
    SCOPED_TRACE("--amp " + amp);
    auto config = [&](const std::string& name) {
      examples::TrainConfig c = small_config(name);
      c.amp = amp;
      return c;
    };
    examples::TrainConfig straight = config("straight");
    straight.epochs = 2;
    const Trained want = train_small_mlp(straight);

    const std::string checkpoint = (dir_ / ("run_" + amp + ".safetensors")).string();
    examples::TrainConfig first = config("first");
    first.epochs = 1;
    first.save_every = 1;
    first.checkpoint_path = checkpoint;
    const Trained after_one = train_small_mlp(first);
    ASSERT_TRUE(fs::exists(checkpoint));
    const nn::StateDict saved = nn::load_safetensors(checkpoint);
    EXPECT_EQ(saved.count("scaler.scale"), amp == "fp16" ? 1u : 0u);
    if (amp == "fp16") {
      EXPECT_EQ(saved.at("scaler._growth_tracker").item(), saved.at("progress.steps").item());
    }

    // Fresh model, optimizer, scheduler and loaders, as a new process would build them.
    examples::TrainConfig second = config("second");
    second.epochs = 2;
    second.resume = checkpoint;
    const Trained got = train_small_mlp(second);
    expect_same_bits(got.weights, want.weights, "weights");
    expect_same_bits(got.optimizer, want.optimizer, "optimizer state");
    // The weights moved in the second epoch: the comparison above was not of two untrained runs.
    EXPECT_NE(std::memcmp(after_one.weights.at("fc1.weight").raw_data(), got.weights.at("fc1.weight").raw_data(),
                          got.weights.at("fc1.weight").nbytes()),
              0);
  }
}

TEST_F(Resume, MismatchesFailWithClearErrors) {
  const std::string checkpoint = (dir_ / "run.safetensors").string();
  examples::TrainConfig first = small_config("mismatch");
  first.epochs = 1;
  first.save_every = 1;
  first.checkpoint_path = checkpoint;
  train_small_mlp(first);

  examples::TrainConfig config = small_config("mismatch");
  config.epochs = 2;
  config.resume = checkpoint;
  examples::setup(config);
  examples::Loaders data = examples::fashion_mnist_loaders(config, /*augment=*/true);
  auto fit_with = [&](nn::Module& model, optim::Optimizer& optimizer, optim::LRScheduler* scheduler,
                      const examples::TrainConfig& c) {
    examples::fit(model, [&](const Tensor& x) { return model(x); }, optimizer, scheduler, *data.train, *data.test, c,
                  "test_training");
  };
  examples::MLP mlp(0.5);
  optim::SGD sgd(mlp.parameters(), optim::SGDOptions(0.1));
  optim::CosineAnnealingLR schedule(sgd, 10);
  optim::AdamW adamw(mlp.parameters(), optim::AdamWOptions());
  examples::ResNet20 resnet;
  optim::SGD resnet_sgd(resnet.parameters(), optim::SGDOptions(0.1));

  expect_error([&] { fit_with(mlp, adamw, nullptr, config); },
               "[resume] " + checkpoint + ": the checkpoint's optimizer is 'SGD' but this run's is 'AdamW'");
  expect_error([&] { fit_with(resnet, resnet_sgd, nullptr, config); },
               "the checkpoint's model is 'MLP' but this run's is 'ResNet20'");
  expect_error([&] { fit_with(mlp, sgd, nullptr, config); },
               "the checkpoint's scheduler is 'yes' but this run's is 'none'");
  examples::TrainConfig other_seed = config;
  other_seed.seed = 6;
  expect_error([&] { fit_with(mlp, sgd, &schedule, other_seed); },
               "the checkpoint's seed is '5' but this run's is '6'");
  examples::TrainConfig other_amp = config;
  other_amp.amp = "bf16";
  expect_error([&] { fit_with(mlp, sgd, &schedule, other_amp); },
               "the checkpoint's amp is 'none' but this run's is 'bf16'");
  examples::TrainConfig done = config;
  done.epochs = 1;
  expect_error([&] { fit_with(mlp, sgd, &schedule, done); },
               "has already trained 1 epoch(s), and --epochs is 1: nothing left to train");
  const std::string weights = (dir_ / "weights.safetensors").string();
  nn::save(mlp, weights);
  examples::TrainConfig plain = config;
  plain.resume = weights;
  expect_error([&] { fit_with(mlp, sgd, &schedule, plain); },
               "[resume] " + weights + ": not an ember training checkpoint");

  // Damaged checkpoints: a count that is no whole number, and a parameter's lost optimizer state.
  nn::Metadata metadata;
  const nn::StateDict saved = nn::load_safetensors(checkpoint, &metadata);
  const std::string damaged = (dir_ / "damaged.safetensors").string();
  examples::TrainConfig from_damaged = config;
  from_damaged.resume = damaged;
  auto resume_after = [&](const std::function<void(nn::StateDict&)>& damage) {
    nn::StateDict changed = saved;
    damage(changed);
    nn::save_safetensors(changed, damaged, metadata);
    fit_with(mlp, sgd, &schedule, from_damaged);
  };
  for (const double epochs : {1e300, 1.5, std::nan("")})
    expect_error([&] { resume_after([&](nn::StateDict& d) { d["progress.epochs"] = scalar_tensor(epochs, kFloat64); }); },
                 "'progress.epochs' must be a whole number");
  expect_error([&] { resume_after([](nn::StateDict& d) { d.erase("optim.state.0.momentum_buffer"); }); },
               "the optimizer state lacks 'optim.state.0.momentum_buffer' after");
}

TEST_F(Resume, ANonFiniteLossStopsBeforeTheOptimizerStep) {
  UntrainedMlp run("nan");
  expect_error([&] { run.fit(run.config, [&](const Tensor& x) { return run.model(x) * std::nan(""); }); },
               "[train] the loss is nan at step 1 (epoch 1, batch 1); stopping before the optimizer step");
  expect_same_bits(run.model.state_dict(), run.before, "weights after the NaN loss");
}

TEST_F(Resume, UnwritableSavePathsFailBeforeTraining) {
  UntrainedMlp run("unwritable");
  auto fit = [&](const examples::TrainConfig& c) { run.fit(c, [&](const Tensor& x) { return run.model(x); }); };
  const std::string nowhere = (dir_ / "no" / "such" / "dir" / "x.safetensors").string();
  examples::TrainConfig save = run.config;
  save.save = nowhere;
  expect_error([&] { fit(save); }, "[test_training] " + nowhere + ": cannot open a temporary file");
  examples::TrainConfig checkpoints = run.config;
  checkpoints.save_every = 1;
  checkpoints.checkpoint_path = dir_.string();
  expect_error([&] { fit(checkpoints); }, "[test_training] " + dir_.string() + ": is a folder, not a file");
  expect_same_bits(run.model.state_dict(), run.before, "weights after the failed starts");  // no step was taken
}
