#include "cuda/context.h"

#include <memory>
#include <mutex>

#include "cuda/bad_index.h"
#include "cuda/check.h"

namespace ember::cuda {
namespace {

struct DeviceContext {
  std::mutex mutex;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};

// Created on first use, sized by device_count(), and never destroyed: streams and handles are
// still in use by static objects during exit, and destroying a cuBLAS handle after the CUDA
// runtime has torn itself down crashes. The driver reclaims them with the process.
DeviceContext& context(int index) {
  static DeviceContext* contexts = new DeviceContext[static_cast<size_t>(device_count() > 0 ? device_count() : 1)];
  check_device(Device(DeviceType::CUDA, index));
  return contexts[index];
}

}  // namespace

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver / no device: unavailable, not an error
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

void check_device(Device device) {
  EMBER_CHECK(device.is_cuda(), "[cuda] expected a CUDA device, got ", device);
  const int n = device_count();
  EMBER_CHECK(n > 0, "[cuda] cannot use ", device, ": no CUDA device is available (no GPU, or no driver)");
  EMBER_CHECK(device.index >= 0 && device.index < n, "[cuda] cannot use ", device, ": there ",
              n == 1 ? "is 1 CUDA device" : "are " + std::to_string(n) + " CUDA devices");
}

cudaStream_t stream(int index) {
  DeviceContext& c = context(index);
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.stream) {
    DeviceGuard guard(index);
    // A blocking stream (not cudaStreamNonBlocking): should anything use the legacy default
    // stream (a plain cudaMemcpy in user code), it is still ordered with ember's work.
    CUDA_CHECK(cudaStreamCreate(&c.stream));
  }
  return c.stream;
}

cublasHandle_t cublas_handle(int index) {
  cudaStream_t s = stream(index);
  DeviceContext& c = context(index);
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.blas) {
    DeviceGuard guard(index);
    cublasHandle_t handle = nullptr;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetStream(handle, s));
    c.blas = handle;
  }
  return c.blas;
}

void synchronize(int index) {
  cudaStream_t s = stream(index);
  CUDA_CHECK(cudaStreamSynchronize(s));
  raise_bad_index(index);  // Note [Index errors found on the device]
}

void synchronize() {
  for (int i = 0; i < device_count(); ++i) {
    DeviceContext& c = context(i);
    cudaStream_t s;
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      s = c.stream;
    }
    if (!s) continue;
    CUDA_CHECK(cudaStreamSynchronize(s));
    raise_bad_index(i);
  }
}

DeviceGuard::DeviceGuard(int index) {
  int current = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  if (current != index) {
    CUDA_CHECK(cudaSetDevice(index));
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);  // a destructor must not throw
}

}  // namespace ember::cuda
