#pragma once
// gradcheck: compares the gradients autograd computes with central finite differences.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch, naming the input and element
  explicit operator bool() const { return ok; }
};

// Note [gradcheck tolerances]
// An element passes when |analytical - numerical| <= atol + rtol * |numerical|. With float64
// inputs the defaults are eps 1e-6, atol 1e-5, rtol 1e-3. Float32 inputs are checked too, as in
// PyTorch, after a one-line warning on stderr (once per call): a float32 output carries a
// rounding error near 6e-8 of its size, and a difference quotient divides that by 2 eps, so
// eps 1e-6 would drown the derivative in noise. Their defaults are eps 1e-3 (rounding noise
// around 1e-4 of the output's size, truncation error eps^2 f''' / 6 around 2e-7), atol 1e-2 and
// rtol 1e-2: loose enough for that noise, tight enough to catch a wrong formula. Tolerances given
// explicitly are used as given. The quotient divides by the step actually taken (x + eps rounds
// in float32), not by 2 eps.
struct GradcheckTolerances {
  double eps, atol, rtol;
};
inline constexpr GradcheckTolerances kFloat64Tolerances{1e-6, 1e-5, 1e-3};
inline constexpr GradcheckTolerances kFloat32Tolerances{1e-3, 1e-2, 1e-2};

// `fn` must be deterministic; the inputs that require grad (the ones checked) must be contiguous
// float64 or float32 CPU tensors. They are perturbed in place one element at a time and restored.
// The output is contracted with a fixed random vector v, so one backward gives v^T J, and each
// input element is perturbed by +-eps to get the same product numerically. An unset tolerance
// takes the default of the inputs' precision (Note [gradcheck tolerances]).
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, std::optional<double> eps = std::nullopt,
                          std::optional<double> atol = std::nullopt, std::optional<double> rtol = std::nullopt);

}  // namespace ember::autograd
