#include "core/generator.h"

#include <map>
#include <memory>

namespace ember {

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void Generator::set_state(GeneratorState s) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = s;
}

std::pair<uint64_t, uint64_t> Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t offset = state_.offset;
  state_.offset += (n + 3) / 4;
  return {state_.seed, offset};
}

namespace {
constexpr uint64_t kDefaultSeed = 67280421310721ull;  // any fixed value: runs are reproducible

struct Generators {
  std::mutex mutex;
  std::map<std::pair<int, int>, std::unique_ptr<Generator>> by_device;
  uint64_t seed = kDefaultSeed;
};

Generators& generators() {
  static Generators* g = new Generators;  // never destroyed: usable during exit
  return *g;
}
}  // namespace

Generator& default_generator(Device device) {
  Generators& g = generators();
  std::lock_guard<std::mutex> lock(g.mutex);
  auto& slot = g.by_device[{static_cast<int>(device.type), device.index}];
  if (!slot) slot = std::make_unique<Generator>(g.seed);
  return *slot;
}

void manual_seed(uint64_t seed) {
  Generators& g = generators();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;  // generators created later (a device used for the first time) start here too
  for (auto& [key, gen] : g.by_device) gen->manual_seed(seed);
}

std::vector<std::pair<Device, GeneratorState>> get_rng_states() {
  Generators& g = generators();
  std::lock_guard<std::mutex> lock(g.mutex);
  std::vector<std::pair<Device, GeneratorState>> states;
  for (auto& [key, gen] : g.by_device)
    states.emplace_back(Device(static_cast<DeviceType>(key.first), key.second), gen->state());
  return states;
}

void set_rng_states(const std::vector<std::pair<Device, GeneratorState>>& states) {
  for (const auto& [device, state] : states) default_generator(device).set_state(state);
}

RngStateGuard::RngStateGuard() : saved_(get_rng_states()) {}
RngStateGuard::~RngStateGuard() { set_rng_states(saved_); }

}  // namespace ember
