#include "core/autograd/gradcheck.h"

#include <cmath>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {

double contract(const Tensor& out, const Tensor& v) { return sum(out.to(kFloat64) * v).item(); }

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  std::vector<Tensor> checked;
  std::vector<size_t> positions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    EMBER_CHECK(inputs[i].device().is_cpu() && inputs[i].dtype() == kFloat64 && inputs[i].is_contiguous(),
                "[gradcheck] input ", i, " must be a contiguous float64 CPU tensor, got ", inputs[i].dtype(), " on ",
                inputs[i].device());
    checked.push_back(inputs[i]);
    positions.push_back(i);
  }
  EMBER_CHECK(!checked.empty(), "[gradcheck] no input requires grad");

  Tensor out = fn(inputs);
  // v comes from a private stream so gradcheck leaves the global generators alone.
  Tensor v = empty(out.shape(), kFloat64);
  if (v.numel() > 0) kernels::random[kCPU](kernels::RandomKind::Normal, v, 1234, 0, 0.0, 1.0);
  std::vector<Tensor> analytical = grad({out.to(kFloat64)}, checked, {v});

  // Perturb the inputs themselves (not copies), so that a function reading them through other
  // handles — a module's parameters captured by a closure — sees the perturbation too.
  NoGradGuard no_grad;
  for (size_t k = 0; k < checked.size(); ++k) {
    auto* data = checked[k].data<double>();
    std::vector<double> a = analytical[k].to_vector<double>();
    for (int64_t j = 0; j < checked[k].numel(); ++j) {
      const double orig = data[j];
      data[j] = orig + eps;
      const double plus = contract(fn(inputs), v);
      data[j] = orig - eps;
      const double minus = contract(fn(inputs), v);
      data[j] = orig;
      const double numerical = (plus - minus) / (2 * eps);
      const double analytic = a[static_cast<size_t>(j)];
      if (std::fabs(analytic - numerical) > atol + rtol * std::fabs(numerical) || std::isnan(analytic)) {
        return {false, detail::concat("gradcheck: input ", positions[k], " element ", j, ": analytical ", analytic,
                                      " vs numerical ", numerical)};
      }
    }
  }
  return {};
}

}  // namespace ember::autograd
