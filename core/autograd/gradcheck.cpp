#include "core/autograd/gradcheck.h"

#include <cmath>
#include <iostream>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {

const Tensor& checked_output(const Tensor& out) {
  EMBER_CHECK(out.defined(), "[gradcheck] the function returned an undefined tensor");
  return out;
}

double contract(const Tensor& out, const Tensor& v) { return sum(out.to(kFloat64) * v).item(); }

// The directional derivative v^T J e_j of every element j of `input`, by central differences.
// The input is perturbed in place (not a copy), so that a function reading it through other
// handles — a module's parameters captured by a closure — sees the perturbation too.
template <class T>
std::vector<double> numerical_gradient(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                       const std::vector<Tensor>& inputs, const Tensor& input, const Tensor& v,
                                       double eps) {
  T* data = input.data<T>();
  std::vector<double> out(static_cast<size_t>(input.numel()));
  for (int64_t j = 0; j < input.numel(); ++j) {
    // Restores the element however fn leaves (it may throw): the caller's tensor is not gradcheck's.
    struct Restore {
      T* at;
      T value;
      ~Restore() { *at = value; }
    } restore{&data[j], data[j]};
    const T orig = restore.value;
    data[j] = static_cast<T>(orig + eps);
    const double x_plus = data[j];
    const double plus = contract(checked_output(fn(inputs)), v);
    data[j] = static_cast<T>(orig - eps);
    const double x_minus = data[j];
    const double minus = contract(checked_output(fn(inputs)), v);
    out[static_cast<size_t>(j)] = (plus - minus) / (x_plus - x_minus);
  }
  return out;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, std::optional<double> eps, std::optional<double> atol,
                          std::optional<double> rtol) {
  std::vector<Tensor> checked;
  std::vector<size_t> positions;
  std::string float32_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    EMBER_CHECK(inputs[i].device().is_cpu() && is_floating(inputs[i].dtype()) && inputs[i].is_contiguous(),
                "[gradcheck] input ", i, " must be a contiguous float64 (or float32) CPU tensor, got ",
                inputs[i].dtype(), " on ", inputs[i].device());
    if (inputs[i].dtype() == kFloat32) float32_inputs += (float32_inputs.empty() ? "" : ", ") + std::to_string(i);
    checked.push_back(inputs[i]);
    positions.push_back(i);
  }
  EMBER_CHECK(!checked.empty(), "[gradcheck] no input requires grad");
  const GradcheckTolerances defaults = float32_inputs.empty() ? kFloat64Tolerances : kFloat32Tolerances;
  const GradcheckTolerances tol{eps.value_or(defaults.eps), atol.value_or(defaults.atol),
                                rtol.value_or(defaults.rtol)};
  // A zero or NaN step makes every difference quotient NaN, and a NaN tolerance makes every
  // comparison false: either would pass any backward.
  EMBER_CHECK(std::isfinite(tol.eps) && tol.eps > 0, "[gradcheck] eps must be a positive finite number, got ", tol.eps);
  EMBER_CHECK(std::isfinite(tol.atol) && tol.atol >= 0, "[gradcheck] atol must be a finite number >= 0, got ", tol.atol);
  EMBER_CHECK(std::isfinite(tol.rtol) && tol.rtol >= 0, "[gradcheck] rtol must be a finite number >= 0, got ", tol.rtol);
  if (!float32_inputs.empty())
    std::cerr << "ember gradcheck: warning: input(s) " << float32_inputs << " are float32, checked with eps "
              << tol.eps << ", atol " << tol.atol << ", rtol " << tol.rtol
              << "; float64 inputs give a far tighter check\n";

  Tensor out = checked_output(fn(inputs));
  // v comes from a private stream so gradcheck leaves the global generators alone.
  Tensor v = empty(out.shape(), kFloat64);
  if (v.numel() > 0) kernels::random[kCPU](kernels::RandomKind::Normal, v, 1234, 0, 0.0, 1.0);
  std::vector<Tensor> analytical = grad({out.to(kFloat64)}, checked, {v});

  NoGradGuard no_grad;
  for (size_t k = 0; k < checked.size(); ++k) {
    std::vector<double> a = analytical[k].to_vector<double>();
    std::vector<double> n = checked[k].dtype() == kFloat32
                                ? numerical_gradient<float>(fn, inputs, checked[k], v, tol.eps)
                                : numerical_gradient<double>(fn, inputs, checked[k], v, tol.eps);
    for (size_t j = 0; j < a.size(); ++j) {
      const bool close = std::fabs(a[j] - n[j]) <= tol.atol + tol.rtol * std::fabs(n[j]);  // false for a NaN
      if (!close) {
        return {false, detail::concat("gradcheck: input ", positions[k], " element ", j, ": analytical ", a[j],
                                      " vs numerical ", n[j])};
      }
    }
  }
  return {};
}

}  // namespace ember::autograd
