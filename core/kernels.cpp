#include "core/kernels.h"

#include <atomic>

namespace ember::kernels {

namespace {
// Constant-initialised, so registrars running during static initialisation may use it.
std::atomic<bool> registered_backends[kNumDeviceTypes];
}  // namespace

bool backend_registered(DeviceType type) { return registered_backends[static_cast<int>(type)].load(); }
void note_registration(DeviceType type) { registered_backends[static_cast<int>(type)].store(true); }

}  // namespace ember::kernels
