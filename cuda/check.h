#pragma once
// CUDA_CHECK / CUBLAS_CHECK: turn a failed CUDA runtime or cuBLAS call into an ember::Error that
// names the call, the error and the file:line of the call site (EMBER_FAIL records the line of
// the macro's expansion, i.e. the caller's).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/check.h"

// Note [Clearing the CUDA error state]
// The runtime remembers the last error and cudaGetLastError() both returns and clears it. A
// failed call is reported by throwing, and the error is cleared first, so the next
// CUDA_CHECK(cudaGetLastError()) after a kernel launch does not report this old failure again.
// (Sticky errors, e.g. an illegal address in a kernel, cannot be cleared: every later call
// fails with them, which is the only honest answer after the context was corrupted.)
#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    const cudaError_t ember_cuda_err_ = (expr);                                            \
    if (ember_cuda_err_ != cudaSuccess) [[unlikely]] {                                     \
      (void)cudaGetLastError();                                                            \
      EMBER_FAIL("[cuda] ", #expr, " failed: ", cudaGetErrorName(ember_cuda_err_), " (",    \
                 cudaGetErrorString(ember_cuda_err_), ")");                                \
    }                                                                                      \
  } while (0)

#define CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                     \
    const cublasStatus_t ember_cublas_status_ = (expr);                                    \
    if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                      \
      EMBER_FAIL("[cublas] ", #expr, " failed: ", cublasGetStatusName(ember_cublas_status_), \
                 " (", cublasGetStatusString(ember_cublas_status_), ")");                  \
    }                                                                                      \
  } while (0)
