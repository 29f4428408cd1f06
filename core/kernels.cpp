#include "core/kernel_table.h"

#include <atomic>

#include "core/kernels/elementwise.h"

namespace ember::kernels {

namespace {
// Constant-initialised, so registrars running during static initialisation may use it.
std::atomic<bool> registered_backends[kNumDeviceTypes];
std::atomic<DeviceCheck*> device_checks[kNumDeviceTypes];
}  // namespace

bool set_device_check(DeviceType type, DeviceCheck* check) {
  device_checks[static_cast<int>(type)].store(check);
  return true;
}

void detail::run_device_check(DeviceType type) {
  if (DeviceCheck* check = device_checks[static_cast<int>(type)].load()) check();  // may throw: stays unchecked
  device_checked[static_cast<int>(type)].store(true, std::memory_order_relaxed);
}

void detail::convert_into(const Tensor& src, const Tensor& dst) { copy[dst.device()](src, dst); }

void detail::no_sixteen_bit_kernel(const char* name, DType dtype) {
  EMBER_FAIL("[", name, "] has no ", dtype_name(dtype), " kernel (declared without its Writes, it cannot be "
             "staged through float32)");
}

bool backend_registered(DeviceType type) { return registered_backends[static_cast<int>(type)].load(); }
void note_registration(DeviceType type) { registered_backends[static_cast<int>(type)].store(true); }

}  // namespace ember::kernels
