#pragma once
// gradcheck: compares the gradients autograd computes with central finite differences.
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch, naming the input and element
  explicit operator bool() const { return ok; }
};

// `fn` must be deterministic; the inputs that require grad (the ones checked) must be contiguous
// float64 CPU tensors. They are perturbed in place one element at a time and restored. The output is contracted with a fixed random vector v, so one backward gives
// v^T J, and each input element is perturbed by +-eps to get the same product numerically.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5,
                          double rtol = 1e-3);

}  // namespace ember::autograd
