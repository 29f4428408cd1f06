#include "examples/run_export.h"

#include <filesystem>
#include <vector>

#include "core/ops.h"

namespace ember::examples {

int64_t export_run(const std::string& dir, const nn::Module& model, data::DataLoader& train, data::DataLoader& val,
                   int64_t epochs, nn::Metadata settings) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  EMBER_CHECK(!error, "[export_run] cannot create the folder '", dir, "': ", error.message());
  std::vector<Tensor> inputs, targets, val_inputs, val_targets;
  std::vector<int64_t> batch_sizes;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    train.set_epoch(epoch);
    for (data::Batch& b : train) {
      batch_sizes.push_back(b.data.size(0));
      inputs.push_back(b.data);
      targets.push_back(b.target);
    }
  }
  train.set_epoch(0);
  for (data::Batch& b : val) {
    val_inputs.push_back(b.data);
    val_targets.push_back(b.target);
  }
  EMBER_CHECK(!batch_sizes.empty() && !val_inputs.empty(), "[export_run] nothing to export: ", batch_sizes.size(),
              " training and ", val_inputs.size(), " validation batches");
  const auto steps = static_cast<int64_t>(batch_sizes.size());
  settings["steps"] = std::to_string(steps);
  nn::save_safetensors(model.state_dict(), dir + "/init.safetensors", settings);
  nn::save_safetensors({{"train_inputs", cat(inputs)},
                        {"train_targets", cat(targets)},
                        {"batch_sizes", from_vector<int64_t>(batch_sizes, {steps}, TensorOptions(kInt64))},
                        {"val_inputs", cat(val_inputs)},
                        {"val_targets", cat(val_targets)}},
                       dir + "/batches.safetensors", settings);
  return steps;
}

}  // namespace ember::examples
