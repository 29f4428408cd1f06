#pragma once
// Note [cuDNN loaded at run time]
// cuDNN 9 is a 130 KB front library, libcudnn.so.9, that loads its engines on demand from the
// same folder: libcudnn_engines_precompiled alone is 245 MB, which no GPU bundle could carry
// (Note [The GPU bundle] in scripts/gpu-bundle). ember_cuda is therefore not linked with it: it
// includes cudnn.h for the types and loads libcudnn.so.9 with dlopen at the first convolution or
// batch norm on CUDA (or cudnn_active()). A program linked with ember starts on a
// machine without cuDNN and runs ember's own kernels there; cudnn_status() says why. A library
// of another major version than the header's, or one that lacks a function below, is treated as
// missing.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "core/check.h"

// Every cuDNN function ember calls: one member of CudnnLibrary each, of the function's type.
#define EMBER_CUDNN_FUNCTIONS(X)                                                                      \
  X(cudnnGetVersion)                                                                                   \
  X(cudnnGetErrorString)                                                                               \
  X(cudnnCreate)                                                                                       \
  X(cudnnSetStream)                                                                                    \
  X(cudnnCreateTensorDescriptor)                                                                       \
  X(cudnnSetTensor4dDescriptor)                                                                        \
  X(cudnnDestroyTensorDescriptor)                                                                      \
  X(cudnnCreateFilterDescriptor)                                                                       \
  X(cudnnSetFilter4dDescriptor)                                                                        \
  X(cudnnDestroyFilterDescriptor)                                                                      \
  X(cudnnCreateConvolutionDescriptor)                                                                  \
  X(cudnnSetConvolution2dDescriptor)                                                                   \
  X(cudnnSetConvolutionMathType)                                                                       \
  X(cudnnDestroyConvolutionDescriptor)                                                                 \
  X(cudnnGetConvolution2dForwardOutputDim)                                                             \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)                                                       \
  X(cudnnGetConvolutionForwardAlgorithm_v7)                                                            \
  X(cudnnGetConvolutionForwardWorkspaceSize)                                                           \
  X(cudnnConvolutionForward)                                                                           \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)                                                  \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                                                       \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                                      \
  X(cudnnConvolutionBackwardData)                                                                      \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount)                                                \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                                     \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                                                    \
  X(cudnnConvolutionBackwardFilter)                                                                    \
  X(cudnnDeriveBNTensorDescriptor)                                                                     \
  X(cudnnBatchNormalizationForwardTraining)                                                            \
  X(cudnnBatchNormalizationForwardInference)                                                           \
  X(cudnnBatchNormalizationBackward)

namespace ember::cuda {

struct CudnnLibrary {
#define EMBER_CUDNN_MEMBER(name) decltype(&::name) name;
  EMBER_CUDNN_FUNCTIONS(EMBER_CUDNN_MEMBER)
#undef EMBER_CUDNN_MEMBER
};

// The loaded library, or null when it cannot be loaded (tried once; cudnn_status() says why).
const CudnnLibrary* cudnn_library();
// The loaded library; call only where cudnn_active() was true.
const CudnnLibrary& cudnn_api();

}  // namespace ember::cuda

// CUDNN_CHECK(cudnn_api().cudnnX(...)): a failed cuDNN call is an ember::Error naming the call and
// cuDNN's message, after clearing the runtime's error state (Note [Clearing the CUDA error state]
// in cuda/check.h).
#define CUDNN_CHECK(expr)                                                                          \
  do {                                                                                             \
    const cudnnStatus_t ember_cudnn_status_ = (expr);                                              \
    if (ember_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                                \
      (void)cudaGetLastError();                                                                    \
      EMBER_FAIL("[cudnn] ", #expr, " failed: ", ::ember::cuda::cudnn_api().cudnnGetErrorString(ember_cudnn_status_), \
                 " (status ", static_cast<int>(ember_cudnn_status_), ")");                         \
    }                                                                                              \
  } while (0)
