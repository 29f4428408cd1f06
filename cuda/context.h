#pragma once
// The CUDA context of ember: which devices exist, one stream per device on which every ember
// kernel, copy and cuBLAS call of that device runs, and a cuBLAS handle bound to that stream.
//
// Note [One stream per device]
// Everything ember does on a device is ordered on that device's single stream. This is what
// makes the caching allocator safe without events: a block freed by the host and handed out
// again is only touched by work queued after everything that used it before, on the same
// stream. The host only waits where it reads results (device -> host copies) or in
// synchronize().
//
// Note [No CUDA calls during static initialisation]
// The backend registers kernels and its allocator factory from static initialisers, which run
// in every program linked with ember_cuda, GPU or not. Those only store function pointers;
// the first CUDA runtime call happens when a CUDA tensor is created or is_available() is asked,
// so a program on a machine without a driver starts, runs on the CPU and can ask.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/device.h"

namespace ember::cuda {

// Whether at least one CUDA device can be used. Never throws: without a driver or a device the
// runtime reports an error, which means "not available" here.
bool is_available();
// Number of usable devices (0 when unavailable). Asked once and remembered.
int device_count();

// Throws ember::Error unless `device` is a CUDA device that exists.
void check_device(Device device);

// The stream (and cuBLAS handle bound to it) of device `index`; created on first use.
cudaStream_t stream(int index);
cublasHandle_t cublas_handle(int index);

// Waits for the work queued on device `index`'s stream, then raises the bad index a kernel found
// meanwhile, if any (Note [Index errors found on the device] in cuda/bad_index.h).
void synchronize(int index);
// Waits for the streams of every device ember has used (and raises as above).
void synchronize();

// Makes device `index` the calling thread's current device for the guard's lifetime (kernel
// launches and cudaMalloc go to the current device).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace ember::cuda
