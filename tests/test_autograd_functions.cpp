// Custom autograd Functions: several outputs (gradchecked, with some outputs unused, with hooks),
// gradients returned in a broadcast shape and the error for an incompatible one, and gradcheck
// on float32 inputs.
#include <gtest/gtest.h>

#include <optional>

#include <string>
#include <vector>

#include "core/autograd/function.h"
#include "core/autograd/gradcheck.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::leaf;
using testutil::values;

namespace {

// Which gradients SplitHalves::backward received, as "dd", "d-", "-d" (d: defined, -: undefined).
thread_local std::string halves_received;

// (x[:k], x[k:]) along dim 0, with the split point in the State and a hand-written backward that
// fills zeros for a half that received no gradient (Note [Multi-output functions]).
struct SplitHalves : autograd::Function<SplitHalves> {
  static constexpr const char* name = "split_halves";
  struct State {
    int64_t first = 0;
    Shape input_shape;
  };
  static std::vector<Tensor> forward(autograd::Ctx&, State& s, const Tensor& x) {
    s.first = x.size(0) / 2;
    s.input_shape = x.shape();
    return {x.narrow(0, 0, s.first), x.narrow(0, s.first, x.size(0) - s.first)};
  }
  static autograd::Grads backward(autograd::Ctx&, const State& s, const autograd::Grads& g) {
    halves_received = std::string(g[0].defined() ? "d" : "-") + (g[1].defined() ? "d" : "-");
    const Tensor& some = g[0].defined() ? g[0] : g[1];  // the engine runs a backward only when one is
    auto or_zeros = [&](const Tensor& grad, int64_t rows) {
      Shape shape = s.input_shape;
      shape[0] = rows;
      return grad.defined() ? grad : zeros(shape, TensorOptions(some.dtype()).with_device(some.device()));
    };
    return {cat({or_zeros(g[0], s.first), or_zeros(g[1], s.input_shape[0] - s.first)}, 0)};
  }
};

// (x^2, x^3), stateless: the short signatures with several outputs. Its backward reads the save
// by position, Ctx::saved(i), deprecated in 0.2.0 and kept working until 0.3.0 (CHANGELOG.md).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct SquareAndCube : autograd::Function<SquareAndCube> {
  static constexpr const char* name = "square_and_cube";
  static std::vector<Tensor> forward(autograd::Ctx& c, const Tensor& x) {
    c.save(x);
    return {x * x, x * x * x};
  }
  static autograd::Grads backward(autograd::Ctx& c, const autograd::Grads& g) {
    Tensor x = c.saved(0), gx;
    if (g[0].defined()) gx = g[0] * x * 2.0;
    if (g[1].defined()) gx = gx.defined() ? gx + g[1] * x * x * 3.0 : g[1] * x * x * 3.0;
    return {gx};
  }
};
#pragma GCC diagnostic pop

static_assert(autograd::TakesGradPerOutput<SplitHalves> && autograd::TakesGradPerOutput<SquareAndCube>);

// Forwards that break the rules of Note [Multi-output functions].
struct SameTensorTwice : autograd::Function<SameTensorTwice> {
  static constexpr const char* name = "same_tensor_twice";
  static std::vector<Tensor> forward(autograd::Ctx&, const Tensor& x) {
    Tensor y = x * 2.0;
    return {y, y};
  }
  static autograd::Grads backward(autograd::Ctx&, const autograd::Grads& g) { return {g[0]}; }
};
struct ReturnsItsInput : autograd::Function<ReturnsItsInput> {
  static constexpr const char* name = "returns_its_input";
  static std::vector<Tensor> forward(autograd::Ctx&, const Tensor& x) { return {x * 2.0, x}; }
  static autograd::Grads backward(autograd::Ctx&, const autograd::Grads& g) { return {g[0] * 2.0 + g[1]}; }
};

// A single-output forward that returns its argument unchanged, and one that returns nothing.
struct Identity : autograd::Function<Identity> {
  static constexpr const char* name = "identity";
  static Tensor forward(autograd::Ctx&, const Tensor& x) { return x; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g * 3.0}; }
};
struct ReturnsNothing : autograd::Function<ReturnsNothing> {
  static constexpr const char* name = "returns_nothing";
  static Tensor forward(autograd::Ctx&, const Tensor&) { return Tensor(); }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g}; }
};

// A backward whose gradient has another dtype than its input: float64, or an integer.
struct Float64Grad : autograd::Function<Float64Grad> {
  static constexpr const char* name = "float64_grad";
  static Tensor forward(autograd::Ctx&, const Tensor& x) { return x * 2.0; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {(g * 2.0).to(kFloat64)}; }
};
struct IntegerGrad : autograd::Function<IntegerGrad> {
  static constexpr const char* name = "integer_grad";
  static Tensor forward(autograd::Ctx&, const Tensor& x) { return x * 2.0; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g.to(kInt64)}; }
};

// Note [Named saved tensors]: x * w, w optional (absent: x * 1); and a backward reading a ref its
// forward never filled.
struct MaybeScaled : autograd::Function<MaybeScaled> {
  static constexpr const char* name = "maybe_scaled";
  struct State {
    autograd::SavedRef x;
    std::optional<autograd::SavedRef> w;
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& x, const Tensor& w) {
    s.x = c.save(x);
    if (w.defined()) s.w = c.save(w);
    return w.defined() ? x * w : x * 1.0;
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g) {
    const Tensor w = c.get(s.w);  // undefined when no w was given
    return {w.defined() ? g * w : g, w.defined() ? g * c.get(s.x) : Tensor()};
  }
};
struct ReadsAnUnfilledRef : autograd::Function<ReadsAnUnfilledRef> {
  static constexpr const char* name = "reads_an_unfilled_ref";
  struct State {
    autograd::SavedRef never_saved;
  };
  static Tensor forward(autograd::Ctx&, State&, const Tensor& x) { return x * 2.0; }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor&) { return {c.get(s.never_saved)}; }
};

// x + b with b broadcast over the rows; the backward returns g for both and leaves b's reduction
// to FunctionNode (Note [Gradient shapes]).
struct AddRowBias : autograd::Function<AddRowBias> {
  static constexpr const char* name = "add_row_bias";
  static Tensor forward(autograd::Ctx&, const Tensor& x, const Tensor& b) { return x + b; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g, g}; }
};

// Returns a gradient of the wrong shape, or one too many.
struct WrongShapeGrad : autograd::Function<WrongShapeGrad> {
  static constexpr const char* name = "wrong_shape_grad";
  static Tensor forward(autograd::Ctx&, const Tensor& x, const Tensor& y) { return x * y; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g, ones({2, 4}, g.dtype())}; }
};
struct TooManyGrads : autograd::Function<TooManyGrads> {
  static constexpr const char* name = "too_many_grads";
  static Tensor forward(autograd::Ctx&, const Tensor& x) { return x * 1.0; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g, g}; }
};

// tanh with a backward off by a factor 1.1: gradcheck must notice, in float32 too.
struct SlightlyWrongTanh : autograd::Function<SlightlyWrongTanh> {
  static constexpr const char* name = "slightly_wrong_tanh";
  struct State {
    autograd::SavedRef y;
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& x) {
    Tensor y = tanh(x);
    s.y = c.save(y);
    return y;
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g) {
    Tensor y = c.get(s.y);
    return {g * (1.0 - y * y) * 1.1};
  }
};

}  // namespace

TEST(MultiOutputFunction, OutputsShareOneNodeAndGradcheck) {
  Tensor x = leaf({5, 3});
  std::vector<Tensor> halves = SplitHalves::apply(x);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(halves[1].shape(), (Shape{3, 3}));
  EXPECT_EQ(halves[0].grad_fn(), halves[1].grad_fn());
  EXPECT_EQ(halves[0].output_nr(), 0);
  EXPECT_EQ(halves[1].output_nr(), 1);
  EXPECT_EQ(halves[0].grad_fn()->num_outputs(), 2);
  // Different functions of each half, so a mix-up of the two gradients cannot pass.
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) {
    std::vector<Tensor> h = SplitHalves::apply(v[0]);
    return cat({exp(h[0]), h[1] * h[1] * 3.0}, 0);
  }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) {
    std::vector<Tensor> p = SquareAndCube::apply(v[0]);
    return stack({p[0], tanh(p[1])}, 0);
  }, {leaf({4})});
}

TEST(MultiOutputFunction, AnOutputWithoutGradientArrivesUndefined) {
  Tensor x = tensor({1, 2, 3, 4}).requires_grad_();
  sum(SplitHalves::apply(x)[1] * 2.0).backward();
  EXPECT_EQ(halves_received, "-d");
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 2, 2}));
  x.grad().zero_();
  sum(SplitHalves::apply(x)[0]).backward();
  EXPECT_EQ(halves_received, "d-");
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return SquareAndCube::apply(v[0])[1]; }, {leaf({3})});
}

TEST(MultiOutputFunction, HooksAndRetainGradAttachToTheirOwnOutput) {
  Tensor x = tensor({1, 2}).requires_grad_();
  std::vector<Tensor> p = SquareAndCube::apply(x);
  p[0].retain_grad();
  p[1].register_hook([](const Tensor& g) { return g * 10.0; });
  p[1].retain_grad();
  sum(p[0] * 2.0 + p[1]).backward();
  EXPECT_EQ(values(p[0].grad()), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(p[1].grad()), (std::vector<double>{10, 10}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4 + 30, 8 + 120}));  // 2 * 2x + 10 * 3x^2
}

TEST(MultiOutputFunction, OutputsMustBeDistinctNewTensors) {
  Tensor x = tensor({1, 2}).requires_grad_();
  expect_error([&] { SameTensorTwice::apply(x); },
               "[same_tensor_twice] forward outputs 0 and 1 are the same tensor; return a view or a clone for each output");
  NoGradGuard no_grad;  // nothing is recorded, so nothing can be lost
  EXPECT_EQ(SameTensorTwice::apply(x).size(), 2u);
}

// Note [An output that is an argument]: the output is an alias with the history; the argument
// stays a leaf with its own gradient.
TEST(FunctionOutputs, AnOutputThatIsAnArgumentBecomesAnAliasAndTheArgumentStaysALeaf) {
  Tensor x = tensor({1, 2}).requires_grad_();
  std::vector<Tensor> out = ReturnsItsInput::apply(x);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(out[1].is_leaf());
  EXPECT_FALSE(out[1].is_same(x));
  EXPECT_EQ(out[1].raw_data(), x.raw_data());  // same storage
  sum(out[0] + out[1]).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3}));

  Tensor w = tensor({1, 2, 3}).requires_grad_();
  Tensor y = Identity::apply(w);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  sum(y).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{3, 3, 3}));
}

TEST(FunctionOutputs, AnUndefinedOutputFailsNamingTheOp) {
  Tensor x = tensor({1, 2}).requires_grad_();
  expect_error([&] { ReturnsNothing::apply(x); }, "[returns_nothing] forward returned an undefined tensor");
}

TEST(GradientShapes, AGradientOfAnotherFloatingDtypeIsCastAndAnIntegerOneIsRefused) {
  Tensor x = tensor({1, 2}).requires_grad_();
  sum(Float64Grad::apply(x)).backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);  // the leaf's gradient keeps the leaf's dtype
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2}));
  Tensor z = tensor({1, 2}).requires_grad_();
  expect_error([&] { sum(IntegerGrad::apply(z)).backward(); },
               "[integer_grad] backward returned a gradient of dtype int64 for input 0; gradients are floating point");
}

TEST(NamedSavedTensors, AnOptionalSaveIsReadByNameAndAMissingOneFailsNamingTheOp) {
  Tensor x = tensor({1, 2}).requires_grad_(), w = tensor({3, 4}).requires_grad_();
  sum(MaybeScaled::apply(x, w)).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 4}));
  EXPECT_EQ(values(w.grad()), (std::vector<double>{1, 2}));
  Tensor z = tensor({1, 2}).requires_grad_();
  sum(MaybeScaled::apply(z, Tensor())).backward();
  EXPECT_EQ(values(z.grad()), (std::vector<double>{1, 1}));
  Tensor y = tensor({1.0}).requires_grad_();
  expect_error([&] { sum(ReadsAnUnfilledRef::apply(y)).backward(); },
               "[reads_an_unfilled_ref] backward read a tensor its forward did not save");
}

TEST(GradientShapes, ABroadcastGradientIsSummedToTheInputShape) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3}).detach().requires_grad_();
  Tensor b = tensor({10, 20, 30}).requires_grad_();
  Tensor y = AddRowBias::apply(x, b);
  (y * tensor({1, 2, 3}).reshape({1, 3})).sum().backward();
  EXPECT_EQ(values(b.grad()), (std::vector<double>{2, 4, 6}));  // summed over the two rows
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor column = tensor({7, 8}).reshape({2, 1}).requires_grad_();  // broadcast along the other dim
  sum(AddRowBias::apply(x.detach(), column)).backward();
  EXPECT_EQ(values(column.grad()), (std::vector<double>{3, 3}));
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return AddRowBias::apply(v[0], v[1]); },
                   {leaf({4, 3}), leaf({1, 3})});
}

TEST(GradientShapes, AnIncompatibleGradientNamesTheOpTheInputAndBothShapes) {
  Tensor x = ones({2, 3}).requires_grad_(), y = ones({3}).requires_grad_();
  expect_error([&] { sum(WrongShapeGrad::apply(x, y)).backward(); },
               "[wrong_shape_grad] backward returned a gradient of shape [2, 4] for input 1 of shape [3], which does "
               "not broadcast to it");
  // An input that needs no gradient is not checked: its gradient is dropped.
  sum(WrongShapeGrad::apply(x, ones({3}))).backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 1.0));
  expect_error([&] { sum(TooManyGrads::apply(x)).backward(); },
               "[too_many_grads] backward returned 2 gradient(s) for 1 tensor input(s)");
}

TEST(GradcheckPrecision, Float32InputsWarnOnceAndUseFloat32Tolerances) {
  auto fn = [](const std::vector<Tensor>& v) { return tanh(v[0]) * v[1] + v[1]; };
  Tensor a = rand({3, 4}).requires_grad_(), b = rand({3, 4}).requires_grad_();
  testing::internal::CaptureStderr();
  autograd::GradcheckResult result = autograd::gradcheck(fn, {a, b});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(result.ok) << result.message;
  const std::string warning = "ember gradcheck: warning: input(s) 0, 1 are float32, checked with eps 0.001, atol "
                              "0.01, rtol 0.01; float64 inputs give a far tighter check\n";
  EXPECT_EQ(err, warning);  // one line for the call, whatever the number of float32 inputs

  testing::internal::CaptureStderr();
  autograd::GradcheckResult wrong = autograd::gradcheck(
      [](const std::vector<Tensor>& v) { return SlightlyWrongTanh::apply(v[0]); }, {rand({6}).requires_grad_()});
  testing::internal::GetCapturedStderr();
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.message.find("gradcheck: input 0 element"), std::string::npos) << wrong.message;

  testing::internal::CaptureStderr();
  EXPECT_GRADCHECK(fn, {leaf({3, 4}), leaf({3, 4})});
  EXPECT_FALSE(autograd::gradcheck([](const std::vector<Tensor>& v) { return SlightlyWrongTanh::apply(v[0]); },
                                   {leaf({6})}).ok);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // float64: no warning
}

TEST(GradcheckPrecision, ExplicitTolerancesAreUsedAsGiven) {
  Tensor x = rand({4}).requires_grad_();
  testing::internal::CaptureStderr();
  // eps 1e-6 in float32: the difference quotient is rounding noise, which tight tolerances expose.
  autograd::GradcheckResult noisy =
      autograd::gradcheck([](const std::vector<Tensor>& v) { return exp(v[0]) * 100.0; }, {x}, 1e-6, 1e-6, 1e-6);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(noisy.ok);
  EXPECT_NE(err.find("checked with eps 1e-06, atol 1e-06, rtol 1e-06"), std::string::npos) << err;
  testing::internal::CaptureStderr();
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return exp(v[0]) * 100.0; }, {x});  // float32's defaults
  testing::internal::GetCapturedStderr();
  expect_error([] { autograd::gradcheck([](const std::vector<Tensor>& v) { return v[0] * 1.0; },
                                        {ones({2, 3}).t().contiguous().t().requires_grad_()}); },
               "[gradcheck] input 0 must be a contiguous float64 (or float32) CPU tensor, got float32 on cpu");
}
