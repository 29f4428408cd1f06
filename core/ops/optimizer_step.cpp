// The fused optimizer step (Note [Multi-tensor optimizer updates] in core/optimizer_step.h): the
// checks of its contract, the kernel call, the version bumps of the in-place writes.
#include "core/optimizer_step.h"

#include <string>
#include <type_traits>

#include "core/autograd/grad_mode.h"
#include "core/kernel_bodies/optimizer_updates.h"
#include "core/kernels.h"

namespace ember {

namespace {

constexpr const char* kOp = "fused_optimizer_step";

// How many state tensors the rule reads and writes (FusedParam::state's order).
int state_count(const OptimizerRule& rule) {
  int count = 0;
  optimizer_bodies::visit_update(rule, kFloat32, [&]<class>(const auto& update) {
    count = std::decay_t<decltype(update)>::kStates;
  });
  return count;
}

// "float32 [3, 4] on cpu", and ", not contiguous" when it is not.
std::string describe(const Tensor& t) {
  return dtype_name(t.dtype()) + (" " + shape_str(t.shape())) + " on " + t.device().str() +
         (t.is_contiguous() ? "" : ", not contiguous");
}

void check_like(const Tensor& param, const Tensor& like, size_t index, const std::string& what) {
  EMBER_CHECK(like.defined() && fused_step_accepts(param, like), "[", kOp, "] parameter ", index, " (",
              describe(param), "): ", what, " is ", like.defined() ? describe(like) : "undefined",
              "; expected contiguous float32 or float64 parameters, with grads and state of their dtype, shape and "
              "device");
}

}  // namespace

// The kernel computes in float32 and float64; 16-bit parameters take the composed update.
bool fused_step_accepts(const Tensor& param, const Tensor& like) {
  return (param.dtype() == kFloat32 || param.dtype() == kFloat64) && param.is_contiguous() && like.is_contiguous() &&
         like.dtype() == param.dtype() && like.device() == param.device() && like.shape() == param.shape() &&
         kernels::optimizer_step.has(param.device().type);
}

void fused_optimizer_step(const OptimizerRule& rule, const std::vector<FusedParam>& params) {
  if (params.empty()) return;
  const int states = state_count(rule);
  const Tensor& first = params.front().param;
  EMBER_CHECK(first.defined(), "[", kOp, "] parameter 0 is undefined");
  for (size_t i = 0; i < params.size(); ++i) {
    const FusedParam& f = params[i];
    EMBER_CHECK(f.param.defined() && f.param.dtype() == first.dtype() && f.param.device() == first.device(), "[", kOp,
                "] expects parameters of one dtype and device: parameter 0 is ", first.dtype(), " on ",
                first.device(), ", parameter ", i, " is ",
                f.param.defined() ? dtype_name(f.param.dtype()) + std::string(" on ") + f.param.device().str()
                                  : std::string("undefined"));
    // In place: as for every in-place op (Note [In-place ops and autograd]).
    EMBER_CHECK(!is_grad_enabled() || !f.param.requires_grad(), "[", kOp, "] updates parameter ", i, " (shape ",
                shape_str(f.param.shape()), ") in place, which takes part in autograd; run it under NoGradGuard");
    check_like(f.param, f.grad, i, "the grad");
    for (int k = 0; k < states; ++k)
      check_like(f.param, f.state[static_cast<size_t>(k)], i, "state " + std::to_string(k));
  }
  kernels::optimizer_step[first.device()](rule, params);
  for (const FusedParam& f : params) {
    f.param.storage()->bump_version();
    for (int k = 0; k < states; ++k) f.state[static_cast<size_t>(k)].storage()->bump_version();
  }
}

}  // namespace ember
