// libFuzzer target: load_training_checkpoint (examples/training_checkpoint.h), the --resume path
// of the example programs, on arbitrary files: the safetensors reader with its checksums, then
// the identity checks and every part's state dict (model, optimizer, scheduler, GradScaler,
// random generators, progress numbers). Bad input must be an ember::Error; anything else
// escaping, or a sanitizer report, is a finding. Loading may leave the run half loaded (the
// examples stop after an error); the next input loads into it as it is, which resuming never
// does but which the reader must survive all the same.
#include <cstdint>

#include "core/check.h"
#include "fuzz/input_file.h"
#include "fuzz/training_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ember::fuzz::InputFile file(".safetensors");
  static ember::fuzz::TrainingRun training;
  try {
    ember::examples::load_training_checkpoint(file.write(data, size), training.state(), training.run);
  } catch (const ember::Error&) {
  }
  return 0;
}
