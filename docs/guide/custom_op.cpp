// An op of your own: a custom autograd Function with a hand-written backward, checked by gradcheck.
#include <ember/ember.h>

#include <cstdio>

using namespace ember;

// y = log(1 + exp(x)), computed stably as relu(x) + log(1 + exp(-|x|)); dy/dx = sigmoid(x).
struct Softplus : autograd::Function<Softplus> {
  static constexpr const char* name = "softplus";
  struct State {
    autograd::SavedRef x;  // what backward needs, by name
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& x) {
    s.x = c.save(x);  // forward's own ops record nothing
    return relu(x) + log(exp(-abs(x)) + 1.0);
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& grad) {
    return {grad * sigmoid(c.get(s.x))};  // one gradient per input
  }
};

Tensor softplus(const Tensor& x) { return Softplus::apply(x); }

int main() {
  manual_seed(0);
  // gradcheck compares backward with central differences, in float64.
  Tensor x = (randn({5, 3}) * 4.0).to(kFloat64).requires_grad_();
  const autograd::GradcheckResult result = autograd::gradcheck([](const std::vector<Tensor>& in) {
    return softplus(in[0]);
  }, {x});
  std::printf("gradcheck: %s\n", result.ok ? "ok" : result.message.c_str());

  // A hook sees the gradient flowing into x (and could replace it).
  Tensor seen;
  autograd::HookHandle handle = x.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return Tensor();  // undefined: keep the gradient as it is
  });
  sum(softplus(x)).backward();
  handle.remove();
  EMBER_CHECK(result.ok, "softplus's backward disagrees with its numerical gradient");
  EMBER_CHECK(max(abs(seen - sigmoid(x.detach()))).item() == 0.0, "the hook saw another gradient");
  return 0;
}
