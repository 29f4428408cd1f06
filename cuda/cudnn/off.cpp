// The cuDNN entry points of a build without cuDNN (EMBER_CUDNN=OFF, or AUTO without cudnn.h):
// every call stays on ember's kernels (Note [cuDNN or ember's kernels] in cuda/cudnn/api.h).
#include "cuda/cudnn/api.h"

namespace ember::cuda {

bool cudnn_active() { return false; }

std::string cudnn_status() { return "ember's kernels: built without cuDNN (EMBER_CUDNN=OFF)"; }

namespace cudnn {

bool conv2d_forward(const Tensor&, const Tensor&, const kernels::Window2d&, const Tensor&) { return false; }
bool conv2d_backward_input(const Tensor&, const Tensor&, const kernels::Window2d&, const Tensor&) { return false; }
bool conv2d_backward_weight(const Tensor&, const Tensor&, const kernels::Window2d&, const Tensor&) { return false; }
bool batch_norm_train_forward(const Tensor&, int64_t, int64_t, int64_t, const Tensor&, const Tensor&, double,
                              const kernels::BatchNormRunning&, const Tensor&, const Tensor&, const Tensor&) {
  return false;
}
bool batch_norm_eval_forward(const Tensor&, int64_t, int64_t, int64_t, const Tensor&, const Tensor&, const Tensor&,
                             const Tensor&, double, const Tensor&) {
  return false;
}
bool batch_norm_backward(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  return false;
}

}  // namespace cudnn
}  // namespace ember::cuda
