// Saving and loading: weights and optimizer state as safetensors files, which PyTorch reads too.
#include <ember/ember.h>

#include <cstdio>
#include <filesystem>
#include <memory>

using namespace ember;

// Modules are not movable (their children are pointers to members): factories return a unique_ptr.
std::unique_ptr<nn::Sequential> make_model() {
  auto model = std::make_unique<nn::Sequential>();
  model->add<nn::Linear>(4, 8);
  model->add<nn::ReLU>();
  model->add<nn::Linear>(8, 2);
  return model;
}

int main() {
  const std::string dir = (std::filesystem::temp_directory_path() / "ember_guide_save_load").string();
  std::filesystem::create_directories(dir);
  manual_seed(0);
  std::unique_ptr<nn::Sequential> made = make_model();
  nn::Sequential& model = *made;
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({16, 4});
  Tensor target = randint(0, 2, {16});
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    cross_entropy(model(x), target).backward();
    optimizer.step();
  }

  // The weights: keys "0.weight", "0.bias", "2.weight", ... as PyTorch's state_dict names them.
  nn::save(model, dir + "/model.safetensors");
  // The optimizer's state (momentum buffers, hyperparameters), to resume training exactly.
  nn::save_safetensors(optimizer.state_dict(), dir + "/optimizer.safetensors");

  std::unique_ptr<nn::Sequential> other = make_model();  // other initial weights ...
  nn::Sequential& restored = *other;
  nn::load(restored, dir + "/model.safetensors");  // ... replaced; strict: every key must match
  optim::SGD resumed(restored.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  resumed.load_state_dict(nn::load_safetensors(dir + "/optimizer.safetensors"));

  NoGradGuard no_grad;
  const double difference = max(abs(model(x) - restored(x))).item();
  std::printf("largest difference after loading: %g\n", difference);
  std::filesystem::remove_all(dir);
  EMBER_CHECK(difference == 0.0, "the loaded model differs by ", difference);
  return 0;
}
