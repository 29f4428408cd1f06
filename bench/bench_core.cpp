// bench_core: Google Benchmark timings of ember's core ops at realistic training shapes
// (float32, and bfloat16 where the name says _bf16; CPU). Every case is named "<op>/<dims>"
// (e.g. "matmul/256x784x512"), and bench/compare_torch.py times the same names in PyTorch, so
// keep the names stable.
//
//   bench_core [--threads N] [Google Benchmark flags...]
//
// --threads N (default 1) is ember's own flag, handled before benchmark::Initialize: it calls
// ember::set_num_threads(N), which sets both ember's OpenMP loops and OpenBLAS. Times are wall
// clock (UseRealTime), because with N > 1 the main thread's CPU time says little; Google
// Benchmark therefore reports each case as "<op>/<dims>/real_time".
//
// Before timing, each case checks a few entries of its result against a reference computed
// here in double precision; a wrong result (or an ember::Error) marks the case as an error in
// the report instead of timing it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/bench_common.h"
#include "core/allocator.h"
#include "core/autograd/engine.h"
#include "core/generator.h"
#include "core/memory_limit.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace {

using ember::DType;
using ember::kBFloat16;
using ember::kFloat32;
using ember::kInt64;
using ember::Shape;
using ember::Tensor;

// ----------------------------------------------------------------------------------------------
// Reference checks

// Thrown by check_close; caught by run_case, which reports it through SkipWithError.
struct Mismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_close(const std::string& what, double got, double want, double rtol = 1e-4, double atol = 1e-4) {
  if (std::isfinite(got) && std::abs(got - want) <= atol + rtol * std::abs(want)) return;
  std::ostringstream msg;
  msg << "wrong result: " << what << " = " << got << ", expected " << want;
  throw Mismatch(msg.str());
}

void check_shape(const std::string& what, const Tensor& t, const Shape& want) {
  if (t.defined() && t.shape() == want) return;
  throw Mismatch("wrong shape of " + what + ": got " + (t.defined() ? ember::shape_str(t.shape()) : "undefined") +
                 ", expected " + ember::shape_str(want));
}

// sum_p a[.., i, p] * b[.., p, j] in double, through at() (so views are read as views).
double dot_ref(const Tensor& a, const Tensor& b, int64_t batch, int64_t i, int64_t j) {
  double acc = 0;
  const int64_t k = a.size(-1);
  for (int64_t p = 0; p < k; ++p) {
    if (a.dim() == 3)
      acc += a.at({batch, i, p}) * b.at({batch, p, j});
    else
      acc += a.at({i, p}) * b.at({p, j});
  }
  return acc;
}

// (Built with a stream: GCC 12's -Wrestrict misfires on `"literal" + std::to_string(...)`.)
std::string idx(const std::vector<int64_t>& index) {
  std::ostringstream s;
  s << "[";
  for (size_t d = 0; d < index.size(); ++d) s << (d ? ", " : "") << index[d];
  s << "]";
  return s.str();
}

// ----------------------------------------------------------------------------------------------
// The timing loop shared by every case

// A case: `setup` makes the inputs, checks one result and returns the step to time. The step
// returns a tensor that must not be optimised away.
using Step = std::function<Tensor()>;

void run_case(benchmark::State& state, const std::function<Step()>& setup) {
  try {
    ember::bench::time_steps(state, setup());
  } catch (const std::exception& e) {
    // An ember::Error from an op, or a Mismatch from a reference check.
    state.SkipWithError(e.what());
  }
}

// "256x784x512"
std::string dims(const std::vector<int64_t>& d) {
  std::ostringstream s;
  for (size_t i = 0; i < d.size(); ++i) s << (i ? "x" : "") << d[i];
  return s.str();
}

benchmark::internal::Benchmark* add(const std::string& name, std::function<void(benchmark::State&)> fn) {
  return benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->UseRealTime()->Unit(benchmark::kMillisecond);
}

constexpr double kF32 = sizeof(float);

// ----------------------------------------------------------------------------------------------
// matmul

// out[b] = a[b] @ b[b]; `transpose_a` makes `a` a .t() view of a contiguous [k, m] tensor. In
// bfloat16 the operands are rounded and the check allows the output's rounding (2^-8 relative).
void register_matmul(const std::string& op, int64_t batch, int64_t m, int64_t k, int64_t n, bool transpose_a,
                     DType dtype = kFloat32) {
  const std::string name = op + "/" + (batch > 1 ? dims({batch, m, k, n}) : dims({m, k, n}));
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      Tensor a, b;
      if (batch > 1) {
        a = ember::randn({batch, m, k});
        b = ember::randn({batch, k, n});
      } else {
        a = transpose_a ? ember::randn({k, m}).t() : ember::randn({m, k});
        b = ember::randn({k, n});
      }
      a = a.to(dtype);
      b = b.to(dtype);
      Tensor c = ember::matmul(a, b);
      check_shape(name, c, batch > 1 ? Shape{batch, m, n} : Shape{m, n});
      for (auto [bi, i, j] : {std::tuple<int64_t, int64_t, int64_t>{0, 0, 0}, {batch - 1, m - 1, n - 1},
                              {batch / 2, m / 2, n / 3}}) {
        const double got = batch > 1 ? c.at({bi, i, j}) : c.at({i, j});
        const double rtol = dtype == kFloat32 ? 1e-4 : 0x1p-8;
        check_close(name + (batch > 1 ? idx({bi, i, j}) : idx({i, j})), got, dot_ref(a, b, bi, i, j), rtol, 1e-3);
      }
      return [a, b] { return ember::matmul(a, b); };
    });
    state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(batch * m * k * n),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  });
}

// ----------------------------------------------------------------------------------------------
// elementwise

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// y = f(x) for an [rows, cols] x; `ref` gives the expected value of one element.
// An elementwise result's tolerance: float32's, or one rounding of a 16-bit dtype (Note
// [Sixteen-bit elementwise loops]: computed in float32, rounded once).
// Integers are exact; the 16-bit floats round their float32 result once.
double elementwise_rtol(DType dtype) {
  if (!ember::is_floating(dtype)) return 0.0;
  return dtype == kFloat32 ? 1e-4 : 2 * ember::finfo(dtype).eps;
}

void register_unary(const std::string& op, int64_t rows, int64_t cols, Tensor (*f)(const Tensor&),
                    double (*ref)(double), DType dtype = kFloat32) {
  const std::string name = op + "/" + dims({rows, cols});
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      Tensor x = ember::randn({rows, cols}).to(dtype);
      Tensor y = f(x);
      check_shape(name, y, {rows, cols});
      for (auto [i, j] : {std::pair<int64_t, int64_t>{0, 0}, {rows - 1, cols - 1}, {rows / 2, cols / 3}})
        check_close(name + idx({i, j}), y.at({i, j}), ref(x.at({i, j})), elementwise_rtol(dtype));
      return [x, f] { return f(x); };
    });
    const double n = static_cast<double>(rows * cols);
    state.SetItemsProcessed(state.iterations() * rows * cols);
    state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * 2 * n *
                                                 static_cast<double>(ember::element_size(dtype))));
  });
}

// out = f(a, b) with a [rows, cols] and b [rows, cols] or, when `bias`, b [cols] broadcast.
void register_binary(const std::string& op, int64_t rows, int64_t cols, bool bias,
                     Tensor (*f)(const Tensor&, const Tensor&), double (*ref)(double, double),
                     DType dtype = kFloat32) {
  const std::string name = op + "/" + dims({rows, cols});
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      Tensor a = ember::randn({rows, cols}).to(dtype);
      Tensor b = (bias ? ember::randn({cols}) : ember::randn({rows, cols})).to(dtype);
      Tensor y = f(a, b);
      check_shape(name, y, {rows, cols});
      for (auto [i, j] : {std::pair<int64_t, int64_t>{0, 0}, {rows - 1, cols - 1}, {rows / 2, cols / 3}})
        check_close(name + idx({i, j}), y.at({i, j}), ref(a.at({i, j}), bias ? b.at({j}) : b.at({i, j})),
                    elementwise_rtol(dtype));
      return [a, b, f] { return f(a, b); };
    });
    const double n = static_cast<double>(rows * cols);
    const double read_b = bias ? static_cast<double>(cols) : n;
    state.SetItemsProcessed(state.iterations() * rows * cols);
    state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * (2 * n + read_b) *
                                                 static_cast<double>(ember::element_size(dtype))));
  });
}

// ----------------------------------------------------------------------------------------------
// reductions

enum class Red { Sum, Mean, Max };

// Reduces an [rows, cols] x over `dim` (-1: all elements) with sum, mean or max.
void register_reduce(const std::string& op, int64_t rows, int64_t cols, Red red, int64_t dim) {
  const std::string name = op + "/" + dims({rows, cols});
  auto apply = [red, dim](const Tensor& x) -> Tensor {
    switch (red) {
      case Red::Sum: return dim < 0 ? ember::sum(x) : ember::sum(x, {dim});
      case Red::Mean: return dim < 0 ? ember::mean(x) : ember::mean(x, {dim});
      case Red::Max: return dim < 0 ? ember::max(x) : ember::max(x, {dim});
    }
    return Tensor();
  };
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      Tensor x = ember::randn({rows, cols});
      Tensor y = apply(x);
      const std::vector<double> v = x.to_vector<double>();
      // Reference of output entry `o`: reduce the elements x[i, j] with i (dim 0) or j (dim 1) free.
      auto ref = [&](int64_t o) {
        double acc = red == Red::Max ? -INFINITY : 0.0;
        int64_t count = 0;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) {
            if ((dim == 0 && j != o) || (dim == 1 && i != o)) continue;
            acc = red == Red::Max ? std::max(acc, v[static_cast<size_t>(i * cols + j)])
                                  : acc + v[static_cast<size_t>(i * cols + j)];
            ++count;
          }
        return red == Red::Mean ? acc / static_cast<double>(count) : acc;
      };
      if (dim < 0) {
        check_shape(name, y, {});
        check_close(name, y.item(), ref(0), 1e-4, 1e-2);
      } else {
        const int64_t outs = dim == 0 ? cols : rows;
        check_shape(name, y, {outs});
        for (int64_t o : {int64_t{0}, outs - 1, outs / 3})
          check_close(name + idx({o}), y.at({o}), ref(o), 1e-4, 1e-3);
      }
      return [x, apply] { return apply(x); };
    });
    state.SetItemsProcessed(state.iterations() * rows * cols);
    state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations() * rows * cols) * kF32));
  });
}

void register_softmax(int64_t rows, int64_t cols) {
  const std::string name = "softmax_dim1/" + dims({rows, cols});
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      Tensor x = ember::randn({rows, cols});
      Tensor y = ember::softmax(x, 1);
      check_shape(name, y, {rows, cols});
      for (int64_t r : {int64_t{0}, rows - 1}) {
        double z = 0;
        for (int64_t j = 0; j < cols; ++j) z += std::exp(x.at({r, j}));
        for (int64_t j : {int64_t{0}, cols - 1}) check_close(name + idx({r, j}), y.at({r, j}), std::exp(x.at({r, j})) / z);
      }
      return [x] { return ember::softmax(x, 1); };
    });
    state.SetItemsProcessed(state.iterations() * rows * cols);
    state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations() * rows * cols) * 2 * kF32));
  });
}

// The backward of y = f(x) alone: x requires grad, the graph of y is built once and kept
// (retain_graph), and each step computes dL/dx for a fixed upstream gradient g. The first step's
// result is in `gx`, for the case's check.
struct BackwardOnly {
  Tensor x, g, gx;
  Step step;
};
BackwardOnly backward_only(const std::string& name, int64_t rows, int64_t cols, Tensor (*f)(const Tensor&)) {
  Tensor x = ember::randn({rows, cols}).requires_grad_();
  Tensor g = ember::randn({rows, cols});
  Tensor y = f(x);
  Step step = [x, y, g] { return ember::autograd::grad({y}, {x}, {g}, /*retain_graph=*/true)[0]; };
  Tensor gx = step();
  check_shape(name, gx, {rows, cols});
  return {x, g, gx, step};
}

// An elementwise f: `derivative` gives f'(x) of one element, so the check is g * f'(x).
void register_backward(const std::string& op, int64_t rows, int64_t cols, Tensor (*f)(const Tensor&),
                       double (*derivative)(double)) {
  const std::string name = op + "_bwd/" + dims({rows, cols});
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      const BackwardOnly c = backward_only(name, rows, cols, f);
      for (auto [i, j] : {std::pair<int64_t, int64_t>{0, 0}, {rows - 1, cols - 1}, {rows / 2, cols / 3}})
        check_close(name + idx({i, j}), c.gx.at({i, j}), c.g.at({i, j}) * derivative(c.x.at({i, j})));
      return c.step;
    });
    state.SetItemsProcessed(state.iterations() * rows * cols);
  });
}

// A row-wise f whose value does not change when a constant is added to a row (softmax,
// layer_norm without affine): for any g, each row of dL/dx then sums to 0, which is the check.
void register_row_backward(const std::string& op, int64_t rows, int64_t cols, Tensor (*f)(const Tensor&)) {
  const std::string name = op + "_bwd/" + dims({rows, cols});
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      const BackwardOnly c = backward_only(name, rows, cols, f);
      for (int64_t r : {int64_t{0}, rows - 1}) {
        double row_sum = 0;
        for (int64_t j = 0; j < cols; ++j) row_sum += c.gx.at({r, j});
        check_close(name + " row sum" + idx({r}), row_sum, 0.0, 0.0, 1e-3);
      }
      return c.step;
    });
    state.SetItemsProcessed(state.iterations() * rows * cols);
  });
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double sigmoid_derivative(double x) { return sigmoid_ref(x) * (1.0 - sigmoid_ref(x)); }
double tanh_derivative(double x) { return 1.0 - std::tanh(x) * std::tanh(x); }
double silu_derivative(double x) { return sigmoid_ref(x) * (1.0 + x * (1.0 - sigmoid_ref(x))); }
double gelu_derivative(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}
Tensor gelu_tanh(const Tensor& x) { return ember::gelu(x, ember::GeluApproximate::Tanh); }
double gelu_tanh_derivative(double x) {
  const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// Mean cross-entropy of [n, c] logits, forward and backward (the gradient of the logits).
void register_cross_entropy(int64_t n, int64_t c) {
  const std::string name = "cross_entropy_fwd_bwd/" + dims({n, c});
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      Tensor logits = ember::randn({n, c}).requires_grad_();
      Tensor target = ember::randint(0, c, {n});
      auto step = [logits, target] {
        logits.set_grad(Tensor());
        Tensor loss = ember::cross_entropy(logits, target);
        loss.backward();
        return logits.grad();
      };
      Tensor loss = ember::cross_entropy(logits, target);
      Tensor g = step();
      check_shape(name + " grad", g, {n, c});
      const std::vector<int64_t> t = target.to_vector<int64_t>();
      double want_loss = 0;
      for (int64_t r = 0; r < n; ++r) {
        double z = 0;
        for (int64_t j = 0; j < c; ++j) z += std::exp(logits.at({r, j}));
        want_loss += std::log(z) - logits.at({r, t[static_cast<size_t>(r)]});
        if (r == 0 || r == n - 1)
          for (int64_t j : {int64_t{0}, t[static_cast<size_t>(r)]}) {
            const double p = std::exp(logits.at({r, j})) / z;
            const double want = (p - (j == t[static_cast<size_t>(r)] ? 1.0 : 0.0)) / static_cast<double>(n);
            check_close(name + " grad" + idx({r, j}), g.at({r, j}), want, 1e-4, 1e-6);
          }
      }
      check_close(name + " loss", loss.item(), want_loss / static_cast<double>(n));
      return step;
    });
    state.SetItemsProcessed(state.iterations() * n);
  });
}

// ----------------------------------------------------------------------------------------------
// One training step of a 784-512-512-10 MLP: forward, mean cross-entropy, backward. Layers are
// y = x @ W + b with W [in, out] (ember::matmul + ember::add), ReLU between them; gradients are
// reset to undefined (PyTorch: set_to_none) before each step, and there is no optimizer step.
void register_mlp_step(int64_t batch) {
  const std::vector<int64_t> widths = {784, 512, 512, 10};
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), widths.begin(), widths.end());
  const std::string name = "mlp_step/" + dims(shape);
  add(name, [=](benchmark::State& state) {
    run_case(state, [&]() -> Step {
      std::vector<Tensor> params;
      for (size_t l = 0; l + 1 < widths.size(); ++l) {
        const double scale = 1.0 / std::sqrt(static_cast<double>(widths[l]));
        params.push_back((ember::randn({widths[l], widths[l + 1]}) * scale).requires_grad_());
        params.push_back((ember::randn({widths[l + 1]}) * scale).requires_grad_());
      }
      Tensor x = ember::randn({batch, widths.front()});
      Tensor target = ember::randint(0, widths.back(), {batch});
      auto step = [params, x, target] {
        for (const Tensor& p : params) p.set_grad(Tensor());
        Tensor h = x;
        for (size_t l = 0; l < params.size(); l += 2) {
          h = ember::add(ember::matmul(h, params[l]), params[l + 1]);
          if (l + 2 < params.size()) h = ember::relu(h);
        }
        Tensor loss = ember::cross_entropy(h, target);
        loss.backward();
        return loss;
      };
      Tensor loss = step();
      // Random weights at this scale give a loss near log(10); the gradients must all be there.
      check_close(name + " loss", loss.item(), std::log(10.0), 0.0, 1.5);
      for (const Tensor& p : params) check_shape(name + " parameter grad", p.grad(), p.shape());
      return step;
    });
    state.SetItemsProcessed(state.iterations() * batch);  // samples per second
  });
}

// ----------------------------------------------------------------------------------------------
// the allocator

// 256 tensors of `bytes` made and dropped in turn. With `fresh`, the cache is emptied before each,
// so every one is a block from the system: the path a memory limit checks (Note [Memory limits]),
// timed with a limit set (`limited`) and without. Otherwise each is a block the cache serves.
void register_allocation(int64_t bytes, bool fresh, bool limited) {
  const std::string name = std::string("alloc") + (fresh ? "_fresh" : "_cached") + (limited ? "_limited/" : "/");
  add(name + std::to_string(bytes), [=](benchmark::State& state) {
    if (limited) ember::memory::set_limit(ember::kCPU, ember::memory::stats().live_bytes + (int64_t{1} << 30));
    run_case(state, [=]() -> Step {
      return [=] {
        Tensor t;
        for (int i = 0; i < 256; ++i) {
          if (fresh) ember::memory::empty_cache();
          t = ember::empty({bytes / 4});
        }
        return t;
      };
    });
    ember::memory::clear_limit(ember::kCPU);
  });
}

void register_all() {
  // matmul
  register_matmul("matmul", 1, 256, 784, 512, false);
  register_matmul("matmul", 1, 512, 512, 512, false);
  register_matmul("matmul", 1, 1024, 1024, 1024, false);
  register_matmul("bmm", 32, 128, 64, 128, false);
  // finetune_text's BERT at 32 texts of 60 tokens: the Linear layers forward ([tokens, 384] by
  // [384, 384 or 1536] and back), their weight gradients (x^T dy), and the per-head attention
  // products (12 heads of 32 features: q k^T and p v).
  register_matmul("matmul", 1, 1920, 384, 384, false);
  register_matmul("matmul", 1, 1920, 384, 1536, false);
  register_matmul("matmul", 1, 1920, 1536, 384, false);
  register_matmul("matmul_tA", 1, 384, 1920, 1536, true);
  register_matmul("bmm", 384, 60, 32, 60, false);
  register_matmul("bmm", 384, 60, 60, 32, false);
  register_matmul("matmul_tA", 1, 512, 512, 512, true);
  register_matmul("matmul_bf16", 1, 512, 512, 512, false, kBFloat16);
  register_matmul("matmul_bf16", 1, 1024, 1024, 1024, false, kBFloat16);
  register_matmul("bmm_bf16", 32, 128, 64, 128, false, kBFloat16);
  // elementwise
  register_binary("add", 4096, 1024, false, &ember::add, [](double a, double b) { return a + b; });
  register_binary("add_bias", 256, 512, true, &ember::add, [](double a, double b) { return a + b; });
  register_binary("mul", 4096, 1024, false, &ember::mul, [](double a, double b) { return a * b; });
  register_unary("relu", 4096, 1024, &ember::relu, [](double x) { return x > 0 ? x : 0.0; });
  register_unary("gelu", 4096, 1024, &ember::gelu, &gelu_ref);
  register_unary("exp", 4096, 1024, &ember::exp, [](double x) { return std::exp(x); });
  // the same in bfloat16 (Note [Sixteen-bit elementwise loops])
  register_binary("add_bf16", 4096, 1024, false, &ember::add, [](double a, double b) { return a + b; }, kBFloat16);
  register_unary("relu_bf16", 4096, 1024, &ember::relu, [](double x) { return x > 0 ? x : 0.0; }, kBFloat16);
  register_unary("gelu_bf16", 4096, 1024, &ember::gelu, &gelu_ref, kBFloat16);
  // int64, exact in its own type (Note [Integer arithmetic])
  register_binary("add_int64", 4096, 1024, false, &ember::add, [](double a, double b) { return a + b; }, kInt64);
  register_binary("mul_int64", 4096, 1024, false, &ember::mul, [](double a, double b) { return a * b; }, kInt64);
  register_binary("gt_int64", 4096, 1024, false, &ember::gt, [](double a, double b) { return a > b ? 1.0 : 0.0; },
                  kInt64);
  // reductions
  register_reduce("sum", 4096, 1024, Red::Sum, -1);
  register_reduce("sum_dim0", 4096, 1024, Red::Sum, 0);
  register_reduce("sum_dim1", 4096, 1024, Red::Sum, 1);
  register_reduce("mean", 4096, 1024, Red::Mean, -1);
  register_reduce("max_dim1", 4096, 1024, Red::Max, 1);
  register_softmax(256, 1000);
  register_backward("sigmoid", 4096, 1024, &ember::sigmoid, &sigmoid_derivative);
  register_backward("tanh", 4096, 1024, &ember::tanh, &tanh_derivative);
  register_backward("silu", 4096, 1024, &ember::silu, &silu_derivative);
  register_backward("gelu", 4096, 1024, &ember::gelu, &gelu_derivative);
  register_backward("gelu_tanh", 4096, 1024, &gelu_tanh, &gelu_tanh_derivative);
  register_row_backward("softmax", 256, 1000, [](const Tensor& x) { return ember::softmax(x, 1); });
  register_row_backward("layer_norm", 4096, 1024, [](const Tensor& x) { return ember::layer_norm(x, {1024}); });
  register_cross_entropy(256, 10);
  // a whole training step
  register_mlp_step(128);
  // the allocator, with and without a memory limit
  for (bool fresh : {false, true})
    for (bool limited : {false, true}) register_allocation(64 * 1024, fresh, limited);
}

}  // namespace

int main(int argc, char** argv) {
  if (!ember::bench::setup_threads(argc, argv, "bench_core")) return 2;
  ember::manual_seed(0);

  register_all();
  return ember::bench::run_benchmarks(argc, argv);
}
