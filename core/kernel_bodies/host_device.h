#pragma once
// EMBER_HOST_DEVICE marks a function that the CPU kernels and the CUDA kernels share: compiled
// for both sides by nvcc, a plain inline function for the C++ compiler.
#ifdef __CUDACC__
#define EMBER_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define EMBER_HOST_DEVICE inline
#endif
