// The conv2d slots through cuDNN (Note [cuDNN or ember's kernels] in cuda/cudnn/api.h).
//
// Note [Deterministic cuDNN algorithms]
// cuDNN offers several algorithms per direction; some of the backward ones add partial sums with
// atomics, so two runs differ in their last bits. ember keeps its promise that a training run
// repeats bitwise, so the algorithm is chosen by cuDNN's heuristics (cudnnGet...Algorithm_v7),
// not by timing (cudnnFind..., whose winner may change from run to run), keeping the first
// candidate that
//   - reports CUDNN_STATUS_SUCCESS and CUDNN_DETERMINISTIC,
//   - computes with FMA only: the descriptor's math type is CUDNN_FMA_MATH, so no TF32 tensor-core
//     rounding (ember's matmuls are IEEE float32 too), and candidates marked for tensor-op math
//     are skipped,
//   - needs at most kMaxWorkspace bytes of scratch, taken from ember's caching allocator for the
//     call (the single stream makes that safe: Note [One stream per device]).
// The choice depends only on the shapes, the dtype, the GPU and cuDNN's version, and is
// remembered per (device, direction, shapes, dtype). When no candidate qualifies, the slot runs
// ember's kernel.
#include <climits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "cuda/context.h"
#include "cuda/cudnn/api.h"
#include "cuda/cudnn/handle.h"
#include "cuda/cudnn/shapes.h"

namespace ember::cuda::cudnn {
namespace {

constexpr size_t kMaxWorkspace = size_t{512} << 20;

// The descriptors of one convolution, with ember's geometry checked against cuDNN's.
struct Convolution {
  cudnnDataType_t type;
  TensorDescriptor x, out;
  FilterDescriptor weight;
  ConvolutionDescriptor conv;

  Convolution(const CudnnConvShapes& s, DType dtype) : type(cudnn_data_type(dtype)) {
    x.set(type, s.x);
    out.set(type, s.out);
    weight.set(type, s.weight);
    CUDNN_CHECK(cudnn_api().cudnnSetConvolution2dDescriptor(conv.get(), s.padding[0], s.padding[1], s.stride[0],
                                                        s.stride[1], s.dilation[0], s.dilation[1],
                                                        CUDNN_CROSS_CORRELATION, type));
    CUDNN_CHECK(cudnn_api().cudnnSetConvolutionMathType(conv.get(), CUDNN_FMA_MATH));
  }
};

// Per direction: cuDNN's heuristic query, workspace query and algorithm type.
struct Forward {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static int max_count(cudnnHandle_t h) {
    int n = 0;
    CUDNN_CHECK(cudnn_api().cudnnGetConvolutionForwardAlgorithmMaxCount(h, &n));
    return n;
  }
  static int candidates(cudnnHandle_t h, const Convolution& c, std::vector<Perf>& perf) {
    int got = 0;
    CUDNN_CHECK(cudnn_api().cudnnGetConvolutionForwardAlgorithm_v7(h, c.x.get(), c.weight.get(), c.conv.get(),
                                                               c.out.get(), static_cast<int>(perf.size()), &got,
                                                               perf.data()));
    return got;
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Convolution& c, Algo a, size_t* bytes) {
    return cudnn_api().cudnnGetConvolutionForwardWorkspaceSize(h, c.x.get(), c.weight.get(), c.conv.get(),
                                                                c.out.get(), a, bytes);
  }
};

struct BackwardData {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static int max_count(cudnnHandle_t h) {
    int n = 0;
    CUDNN_CHECK(cudnn_api().cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &n));
    return n;
  }
  static int candidates(cudnnHandle_t h, const Convolution& c, std::vector<Perf>& perf) {
    int got = 0;
    CUDNN_CHECK(cudnn_api().cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.weight.get(), c.out.get(), c.conv.get(),
                                                                    c.x.get(), static_cast<int>(perf.size()), &got,
                                                                    perf.data()));
    return got;
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Convolution& c, Algo a, size_t* bytes) {
    return cudnn_api().cudnnGetConvolutionBackwardDataWorkspaceSize(h, c.weight.get(), c.out.get(), c.conv.get(),
                                                                     c.x.get(), a, bytes);
  }
};

struct BackwardFilter {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static int max_count(cudnnHandle_t h) {
    int n = 0;
    CUDNN_CHECK(cudnn_api().cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &n));
    return n;
  }
  static int candidates(cudnnHandle_t h, const Convolution& c, std::vector<Perf>& perf) {
    int got = 0;
    CUDNN_CHECK(cudnn_api().cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x.get(), c.out.get(), c.conv.get(),
                                                                      c.weight.get(), static_cast<int>(perf.size()),
                                                                      &got, perf.data()));
    return got;
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Convolution& c, Algo a, size_t* bytes) {
    return cudnn_api().cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c.x.get(), c.out.get(), c.conv.get(),
                                                                       c.weight.get(), a, bytes);
  }
};

template <class Direction>
struct Choice {
  typename Direction::Algo algo;
  size_t workspace;
};

// (device, x, weight, out, padding, stride, dilation, data type)
using Key = std::tuple<int, std::array<int, 4>, std::array<int, 4>, std::array<int, 4>, std::array<int, 2>,
                       std::array<int, 2>, std::array<int, 2>, int>;

// The cuDNN output size must be ember's: a disagreement would be a descriptor bug, not a user error.
void check_output_shape(const Convolution& c, const CudnnConvShapes& s) {
  std::array<int, 4> got{};
  CUDNN_CHECK(cudnn_api().cudnnGetConvolution2dForwardOutputDim(c.conv.get(), c.x.get(), c.weight.get(), &got[0],
                                                            &got[1], &got[2], &got[3]));
  EMBER_CHECK(got == s.out, "[conv2d] cuDNN computes an output of [", got[0], ", ", got[1], ", ", got[2], ", ",
              got[3], "] where ember's geometry gives [", s.out[0], ", ", s.out[1], ", ", s.out[2], ", ", s.out[3],
              "]");
}

// Note [Deterministic cuDNN algorithms]; nullopt when none qualifies.
template <class Direction>
std::optional<Choice<Direction>> choose(int device, const Convolution& c, const CudnnConvShapes& s) {
  static std::mutex mutex;
  static auto* chosen = new std::map<Key, std::optional<Choice<Direction>>>();
  const Key key{device, s.x, s.weight, s.out, s.padding, s.stride, s.dilation, static_cast<int>(c.type)};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = chosen->find(key); it != chosen->end()) return it->second;
  check_output_shape(c, s);
  cudnnHandle_t h = cudnn_handle(device);
  std::vector<typename Direction::Perf> perf(static_cast<size_t>(Direction::max_count(h)));
  const int got = Direction::candidates(h, c, perf);
  std::optional<Choice<Direction>> choice;
  for (int i = 0; i < got && !choice; ++i) {
    const auto& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
    if (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    // A candidate cuDNN cannot size is skipped like one that needs too much: not an error.
    size_t bytes = 0;
    if (Direction::workspace(h, c, p.algo, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kMaxWorkspace)
      choice = Choice<Direction>{p.algo, bytes};
  }
  chosen->emplace(key, choice);
  return choice;
}

// Scratch bytes from ember's caching allocator, for one call.
Tensor workspace(size_t bytes, Device device) {
  return empty({static_cast<int64_t>(bytes)}, TensorOptions(kUInt8).with_device(device));
}

void* bytes_of(const Tensor& t) { return t.numel() > 0 ? t.raw_data() : nullptr; }

// The setup every direction shares: nullopt when cuDNN declines before any cuDNN call.
std::optional<CudnnConvShapes> usable(const Tensor& t, const kernels::Window2d& g, int64_t out_channels) {
  if (!cudnn_active()) return std::nullopt;
  if (t.dtype() != kFloat32 && t.dtype() != kFloat64) return std::nullopt;
  return cudnn_conv_shapes(g, out_channels);
}

}  // namespace

bool conv2d_forward(const Tensor& x, const Tensor& weight, const kernels::Window2d& g, const Tensor& out) {
  const auto s = usable(x, g, weight.size(0));
  if (!s) return false;
  const int device = x.device().index;
  const DeviceGuard guard(device);  // cuDNN launches on the current device
  const Convolution c(*s, x.dtype());
  const auto choice = choose<Forward>(device, c, *s);
  if (!choice) return false;
  const Tensor ws = workspace(choice->workspace, x.device());
  const Blend blend(c.type);
  CUDNN_CHECK(cudnn_api().cudnnConvolutionForward(cudnn_handle(device), blend.one(), c.x.get(), x.raw_data(),
                                              c.weight.get(), weight.raw_data(), c.conv.get(), choice->algo,
                                              bytes_of(ws), choice->workspace, blend.zero(), c.out.get(),
                                              out.raw_data()));
  note_call();
  return true;
}

bool conv2d_backward_input(const Tensor& grad, const Tensor& weight, const kernels::Window2d& g,
                           const Tensor& grad_x) {
  const auto s = usable(grad, g, weight.size(0));
  if (!s) return false;
  const int device = grad.device().index;
  const DeviceGuard guard(device);  // cuDNN launches on the current device
  const Convolution c(*s, grad.dtype());
  const auto choice = choose<BackwardData>(device, c, *s);
  if (!choice) return false;
  const Tensor ws = workspace(choice->workspace, grad.device());
  const Blend blend(c.type);
  CUDNN_CHECK(cudnn_api().cudnnConvolutionBackwardData(cudnn_handle(device), blend.one(), c.weight.get(),
                                                   weight.raw_data(), c.out.get(), grad.raw_data(), c.conv.get(),
                                                   choice->algo, bytes_of(ws), choice->workspace, blend.zero(),
                                                   c.x.get(), grad_x.raw_data()));
  note_call();
  return true;
}

bool conv2d_backward_weight(const Tensor& grad, const Tensor& x, const kernels::Window2d& g,
                            const Tensor& grad_weight) {
  const auto s = usable(grad, g, grad_weight.size(0));
  if (!s) return false;
  const int device = grad.device().index;
  const DeviceGuard guard(device);  // cuDNN launches on the current device
  const Convolution c(*s, grad.dtype());
  const auto choice = choose<BackwardFilter>(device, c, *s);
  if (!choice) return false;
  const Tensor ws = workspace(choice->workspace, grad.device());
  const Blend blend(c.type);
  CUDNN_CHECK(cudnn_api().cudnnConvolutionBackwardFilter(cudnn_handle(device), blend.one(), c.x.get(), x.raw_data(),
                                                     c.out.get(), grad.raw_data(), c.conv.get(), choice->algo,
                                                     bytes_of(ws), choice->workspace, blend.zero(),
                                                     c.weight.get(), grad_weight.raw_data()));
  note_call();
  return true;
}

}  // namespace ember::cuda::cudnn
