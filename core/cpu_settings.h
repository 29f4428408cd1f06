#pragma once
// How the CPU backend runs, chosen per process: its threads, which library runs a convolution
// and a float product, and the vector instructions of ember's own loops. Each starts from an
// environment variable (Note [Choices from the environment] in core/environment_choice.h) and can
// be set at run time. Not ops: core/ops.h includes this header so that code written against the
// old declarations there still compiles.
namespace ember {

// --- threads (core/cpu/parallel.cpp) ---
// Sets the threads of ember's OpenMP loops and of OpenBLAS together (oneDNN runs on that team).
void set_num_threads(int n);
int get_num_threads();

// --- which library runs the CPU's convolutions and float products (core/cpu/{conv,gemm}_backend.cpp) ---
// Reference: ember's im2col + gemm (core/cpu/conv.cpp), the readable one and the tests' oracle.
// OneDNN: oneDNN's float32 convolutions (Note [Convolution through oneDNN]), the default when
// ember is built with it (EMBER_DNNL); cases it does not take still run the reference. The
// environment variable EMBER_CONV_BACKEND=reference|onednn sets the starting choice; choosing
// OneDNN in a build without it fails (a bad variable, at the first CPU op: Note [Choices from
// the environment] in core/environment_choice.h).
enum class ConvBackend { Reference, OneDNN };
void set_conv_backend(ConvBackend backend);
ConvBackend conv_backend();
// Every float32 gemm of the CPU backend (matmul, linear, the reference convolution's products)
// runs on OpenBLAS or on oneDNN's sgemm (Note [Two BLAS for one gemm] in core/cpu/blas.cpp);
// oneDNN is the default when ember is built with it. float64 always runs on OpenBLAS.
// EMBER_GEMM_BACKEND=openblas|onednn sets the starting choice, as for convolutions.
enum class GemmBackend { OpenBLAS, OneDNN };
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();
bool has_onednn();  // built with oneDNN

// --- the vector instructions of ember's own CPU loops (Note [SIMD dispatch] in core/cpu/simd_dispatch.h) ---
// By default the widest the CPU has: AVX-512 (F, VL, BW and DQ), else AVX2 with FMA, else the
// build's baseline (SSE2 on x86-64, the only level elsewhere). set_simd_level picks a narrower
// one (to compare them, or where 512-bit vectors slow the clock); a level the CPU lacks fails.
// EMBER_SIMD=baseline|avx2|avx512 sets the starting level. The libraries (OpenBLAS, oneDNN)
// choose their own instructions.
enum class SimdLevel { Baseline, AVX2, AVX512 };
void set_simd_level(SimdLevel level);
SimdLevel simd_level();
SimdLevel best_simd_level();  // this CPU's widest
const char* simd_level_name(SimdLevel level);  // "baseline", "avx2", "avx512"

}  // namespace ember
