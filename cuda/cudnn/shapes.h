#pragma once
// The sizes ember hands to cuDNN's descriptors, as pure functions (tested without a GPU).
// cuDNN's 4-d descriptors take int sizes and strides, so a tensor of 2^31 or more elements, or a
// size past INT_MAX, has no descriptor: those calls stay on ember's kernels (nullopt).
#include <array>
#include <cstdint>
#include <optional>

#include "core/kernels.h"

namespace ember::cuda {

// A 2-D convolution of x [n, c, h, w] with weight [oc, c, kh, kw] into out [n, oc, oh, ow], all
// NCHW and contiguous: the layouts the conv2d slots receive (the slots' flat [oc, c*kh*kw]
// weight is this 4-d weight byte for byte).
struct CudnnConvShapes {
  std::array<int, 4> x, weight, out;
  std::array<int, 2> padding, stride, dilation;  // (height, width)
};
std::optional<CudnnConvShapes> cudnn_conv_shapes(const kernels::Window2d& g, int64_t out_channels);

// Batch norm's x seen as [n, c, s] becomes the NCHW tensor [n, c, s, 1]: cuDNN's spatial mode
// reduces over n, h and w, which is ember's reduction over n and s. cuDNN answers
// CUDNN_STATUS_NOT_SUPPORTED past a batch size, so larger batches stay on ember's kernels, at the
// limits PyTorch keeps for the same reason (pytorch/pytorch#19911): n <= 880801 for training (the
// forward and the backward), n <= 65535 for inference. An empty x has no descriptor either.
enum class BatchNormPass { Training, Inference };
constexpr int64_t kCudnnBatchNormMaxTrainingBatch = 880801, kCudnnBatchNormMaxInferenceBatch = 65535;
std::optional<std::array<int, 4>> cudnn_batch_norm_shape(int64_t n, int64_t c, int64_t s, BatchNormPass pass);

}  // namespace ember::cuda
