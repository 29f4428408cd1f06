#include "cuda/cudnn/handle.h"

#include <memory>
#include <mutex>
#include <vector>

#include "cuda/context.h"

namespace ember::cuda {

cudnnHandle_t cudnn_handle(int index) {
  cudaStream_t s = stream(index);  // checks the index
  static std::mutex mutex;
  static std::vector<cudnnHandle_t>* handles = new std::vector<cudnnHandle_t>(static_cast<size_t>(device_count()));
  std::lock_guard<std::mutex> lock(mutex);
  cudnnHandle_t& h = (*handles)[static_cast<size_t>(index)];
  if (!h) {
    DeviceGuard guard(index);  // cudnnCreate binds the handle to the current device
    cudnnHandle_t created = nullptr;
    CUDNN_CHECK(cudnn_api().cudnnCreate(&created));
    CUDNN_CHECK(cudnn_api().cudnnSetStream(created, s));
    h = created;
  }
  return h;
}

cudnnDataType_t cudnn_data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    default: EMBER_FAIL("[cudnn] no cuDNN data type for ", dtype_name(dtype));
  }
}

// The destroy calls' status is not checked: a destructor must not throw, and a failed destroy
// leaks one descriptor at most.
TensorDescriptor::TensorDescriptor() { CUDNN_CHECK(cudnn_api().cudnnCreateTensorDescriptor(&d_)); }
TensorDescriptor::~TensorDescriptor() { cudnn_api().cudnnDestroyTensorDescriptor(d_); }
void TensorDescriptor::set(cudnnDataType_t type, const std::array<int, 4>& nchw) {
  CUDNN_CHECK(cudnn_api().cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, type, nchw[0], nchw[1], nchw[2], nchw[3]));
}

FilterDescriptor::FilterDescriptor() { CUDNN_CHECK(cudnn_api().cudnnCreateFilterDescriptor(&d_)); }
FilterDescriptor::~FilterDescriptor() { cudnn_api().cudnnDestroyFilterDescriptor(d_); }
void FilterDescriptor::set(cudnnDataType_t type, const std::array<int, 4>& kcrs) {
  CUDNN_CHECK(cudnn_api().cudnnSetFilter4dDescriptor(d_, type, CUDNN_TENSOR_NCHW, kcrs[0], kcrs[1], kcrs[2], kcrs[3]));
}

ConvolutionDescriptor::ConvolutionDescriptor() { CUDNN_CHECK(cudnn_api().cudnnCreateConvolutionDescriptor(&d_)); }
ConvolutionDescriptor::~ConvolutionDescriptor() { cudnn_api().cudnnDestroyConvolutionDescriptor(d_); }

}  // namespace ember::cuda
