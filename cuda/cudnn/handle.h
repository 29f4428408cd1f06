#pragma once
// What the cuDNN kernels share: one cuDNN handle per device bound to ember's stream, owning
// descriptors, cuDNN's data type of a dtype, and the host-side blend factors.
#include <array>

#include "core/tensor.h"
#include "cuda/cudnn/library.h"

namespace ember::cuda {

// The handle of device `index`, created on first use and bound to cuda::stream(index), so that
// cuDNN's work is ordered with every other kernel of the device (Note [One stream per device]).
// Like the cuBLAS handle, it is never destroyed.
cudnnHandle_t cudnn_handle(int index);

// CUDNN_DATA_FLOAT or CUDNN_DATA_DOUBLE (the only dtypes the slots pass to cuDNN).
cudnnDataType_t cudnn_data_type(DType dtype);

// Owning descriptors, made empty and then set (a failed set still destroys them).
class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  // A contiguous NCHW tensor of these sizes.
  void set(cudnnDataType_t type, const std::array<int, 4>& nchw);
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  void set(cudnnDataType_t type, const std::array<int, 4>& kcrs);  // [oc, c, kh, kw], contiguous
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

// cuDNN computes out = alpha * result + beta * out, with alpha and beta in host memory: double for
// double data, float otherwise. ember's slots overwrite, so alpha = 1 and beta = 0.
struct Blend {
  explicit Blend(cudnnDataType_t type) : is_double(type == CUDNN_DATA_DOUBLE) {}
  const void* one() const { return is_double ? static_cast<const void*>(&d_one) : &f_one; }
  const void* zero() const { return is_double ? static_cast<const void*>(&d_zero) : &f_zero; }

  bool is_double;
  double d_one = 1.0, d_zero = 0.0;
  float f_one = 1.0f, f_zero = 0.0f;
};

}  // namespace ember::cuda
