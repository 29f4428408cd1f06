#pragma once
// Random number generators: one Philox stream per device, state = (seed, offset). A draw of n
// numbers reserves ceil(n / 4) counters and advances the offset past them, so saving the state,
// drawing, restoring and drawing again gives the same numbers (see Note [Philox4x32-10]).
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "core/device.h"

namespace ember {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}

  GeneratorState state() const;
  void set_state(GeneratorState s);
  void manual_seed(uint64_t seed) { set_state({seed, 0}); }
  // Returns (seed, offset) for a draw of n numbers and moves the offset past it.
  std::pair<uint64_t, uint64_t> reserve(uint64_t n);

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

Generator& default_generator(Device device = kCPU);
// Seeds the default generator of every device.
void manual_seed(uint64_t seed);

// Saves the states of every device's default generator and restores them on destruction
// (like torch.random.fork_rng).
class RngStateGuard {
 public:
  RngStateGuard();
  ~RngStateGuard();
  RngStateGuard(const RngStateGuard&) = delete;
  RngStateGuard& operator=(const RngStateGuard&) = delete;

 private:
  std::vector<std::pair<Device, GeneratorState>> saved_;
};

// The states of all default generators that exist now, and a way to put them back.
std::vector<std::pair<Device, GeneratorState>> get_rng_states();
void set_rng_states(const std::vector<std::pair<Device, GeneratorState>>& states);

}  // namespace ember
