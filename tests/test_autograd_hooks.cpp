// Tensor hooks and retain_grad: where and when hooks run, replacing a gradient, removal, the
// error paths, autograd::grad, accumulation across backward calls, and both inside checkpointed
// functions.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "utils/checkpoint.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;

TEST(TensorHooks, LeafHookRunsBeforeAccumulationAndCanReplaceTheGradient) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  std::vector<std::vector<double>> seen;
  std::vector<bool> grad_was_defined;
  x.register_hook([&](const Tensor& g) {
    seen.push_back(values(g));
    grad_was_defined.push_back(x.grad().defined());
    return g * 10.0;
  });
  sum(x * x).backward();
  sum(x * x).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(seen[1], (std::vector<double>{2, 4, 6}));  // the incoming gradient, not .grad
  EXPECT_EQ(grad_was_defined, (std::vector<bool>{false, true}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{40, 80, 120}));  // two replaced gradients
}

TEST(TensorHooks, NonLeafHookRunsOnceOnTheSummedGradient) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor h = x * 2.0;
  int calls = 0;
  h.register_hook([&](const Tensor& g) {
    ++calls;
    EXPECT_EQ(values(g), (std::vector<double>{5, 9}));  // d/dh sum(h*h + h) = 2h + 1, all three uses
    return g * 0.5;
  });
  sum(h * h + h).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5, 9}));  // 2 * 0.5 * (2h + 1)
  EXPECT_FALSE(h.grad().defined());                         // hooks do not retain
}

TEST(TensorHooks, HooksRunInOrderAndAnUndefinedResultKeepsTheGradient) {
  Tensor x = tensor({1.0}).requires_grad_();
  Tensor h = x * 3.0;
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) { return g + 1.0; });
  h.register_hook([&](const Tensor& g) {
    seen.push_back(g.item());
    return Tensor();  // observe only
  });
  h.register_hook([&](const Tensor& g) { return g * 2.0; });
  sum(h).backward();
  EXPECT_EQ(seen, (std::vector<double>{2}));
  EXPECT_EQ(x.grad().item(), 12.0);  // (1 + 1) * 2 * 3
}

TEST(TensorHooks, RemovedHooksDoNotRun) {
  Tensor x = tensor({1, 2}).requires_grad_();
  int first = 0, second = 0;
  autograd::HookHandle a = x.register_hook([&](const Tensor&) {
    ++first;
    return Tensor();
  });
  x.register_hook([&](const Tensor& g) {
    ++second;
    return g * 2.0;
  });
  sum(x).backward();
  a.remove();
  a.remove();  // twice is harmless
  sum(x).backward();
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 2);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4, 4}));

  Tensor h = x * 1.0;
  int on_h = 0;
  autograd::HookHandle b = h.register_hook([&](const Tensor&) {
    ++on_h;
    return Tensor();
  });
  b.remove();
  sum(h).backward();
  EXPECT_EQ(on_h, 0);
  h = Tensor();  // the graph, and the hooks with it, is gone: removing is still harmless
  b.remove();
}

TEST(TensorHooks, AHookMayRemoveItselfWhileRunning) {
  Tensor x = tensor({1.0}).requires_grad_();
  int calls = 0;
  autograd::HookHandle handle;
  handle = x.register_hook([&](const Tensor&) {
    ++calls;
    handle.remove();
    return Tensor();
  });
  sum(x).backward();
  sum(x).backward();
  EXPECT_EQ(calls, 1);
}

TEST(TensorHooks, AHookOnAnIntermediateOutlivesItsHandle) {
  Tensor x = tensor({1, 2}).requires_grad_();
  int calls = 0;
  Tensor loss;
  {
    Tensor h = exp(x);
    h.register_hook([&](const Tensor&) {
      ++calls;
      return Tensor();
    });
    loss = sum(h);
  }
  loss.backward();
  EXPECT_EQ(calls, 1);
}

TEST(TensorHooks, AutogradGradCapturesTheHooksResult) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor h = x * x;
  h.register_hook([](const Tensor& g) { return g * 3.0; });
  x.register_hook([](const Tensor& g) { return g + 1.0; });
  std::vector<Tensor> g = autograd::grad({sum(h)}, {x, h}, {}, /*retain_graph=*/true);
  EXPECT_EQ(values(g[1]), (std::vector<double>{3, 3}));
  EXPECT_EQ(values(g[0]), (std::vector<double>{7, 13}));  // 3 * 2x, then + 1
  EXPECT_FALSE(x.grad().defined());
}

TEST(TensorHooks, ErrorPaths) {
  expect_error([] { tensor({1.0}).register_hook([](const Tensor& g) { return g; }); },
               "[register_hook] cannot be called on a tensor of shape [1] that does not require grad");
  Tensor x = tensor({1, 2}).requires_grad_();
  expect_error([&] { x.register_hook(nullptr); }, "[register_hook] the hook is empty");
  Tensor h = x * 2.0;
  h.register_hook([](const Tensor& g) { return sum(g); });
  expect_error([&] { sum(h).backward(); },
               "[register_hook] a hook returned a gradient of shape [] float32 on cpu for a gradient of shape [2] "
               "float32 on cpu (on its way into affine)");
}

TEST(RetainGrad, FillsANonLeafGradAndAccumulatesAcrossBackwardCalls) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor h = x * 3.0;
  Tensor plain = x * 4.0;
  EXPECT_FALSE(h.retains_grad());
  h.retain_grad();
  h.retain_grad();  // twice is once
  EXPECT_TRUE(h.retains_grad());
  Tensor loss = sum(h * h + plain);
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(values(h.grad()), (std::vector<double>{6, 12}));  // 2h
  EXPECT_FALSE(plain.grad().defined());
  loss.backward();
  EXPECT_EQ(values(h.grad()), (std::vector<double>{12, 24}));
  h.grad().zero_();
  sum(h).backward();
  EXPECT_EQ(values(h.grad()), (std::vector<double>{1, 1}));
}

TEST(RetainGrad, SeesWhatTheHooksReturnAndIsANoOpOnLeaves) {
  Tensor x = tensor({1, 2}).requires_grad_();
  x.retain_grad();
  EXPECT_FALSE(x.retains_grad());
  Tensor h = x * 1.0;
  h.retain_grad();
  h.register_hook([](const Tensor& g) { return g * 5.0; });  // registered later, still runs first
  sum(h).backward();
  EXPECT_EQ(values(h.grad()), (std::vector<double>{5, 5}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5, 5}));
  expect_error([] { ones({2}).retain_grad(); }, "[retain_grad] cannot be called on a tensor of shape [2] that does not require grad");
}

// Note [Hooks and checkpointing]: inside a checkpointed function, hooks and retain_grad act on the
// forward's graph exactly as without checkpointing, and the recompute registers nothing again.
TEST(HooksAndCheckpointing, BehaveAsWithoutCheckpointing) {
  for (bool checkpointed : {false, true}) {
    Tensor w = tensor({0.5, -1.5}).requires_grad_();
    Tensor x = tensor({1, 2}).requires_grad_();
    int w_hook_calls = 0, inner_hook_calls = 0;
    Tensor inner;  // the forward's intermediate (the recompute makes another one)
    auto body = [&](const Tensor& in) {
      w.register_hook([&](const Tensor& g) {
        ++w_hook_calls;
        return g * 2.0;
      });
      Tensor h = exp(in * w);
      h.retain_grad();
      h.register_hook([&](const Tensor&) {
        ++inner_hook_calls;
        return Tensor();
      });
      if (!utils::is_recomputing()) inner = h;
      return tanh(h);
    };
    Tensor out = checkpointed ? utils::checkpoint(body, x) : body(x);
    sum(out * out).backward();
    SCOPED_TRACE(checkpointed ? "checkpointed" : "plain");
    EXPECT_EQ(w_hook_calls, 1);
    EXPECT_EQ(inner_hook_calls, 1);
    ASSERT_TRUE(inner.grad().defined());
    std::vector<double> h = values(inner), t(2), dh(2), dw(2);
    std::vector<double> xs{1, 2};
    for (size_t i = 0; i < 2; ++i) {
      t[i] = std::tanh(h[i]);
      dh[i] = 2 * t[i] * (1 - t[i] * t[i]);
      dw[i] = 2 * dh[i] * h[i] * xs[i];  // the hook on w doubles it
    }
    testutil::expect_near(inner.grad(), dh);
    testutil::expect_near(w.grad(), dw);
  }
}

// Note [End-of-backward callbacks]: queued from a hook, the callback runs once, after the last
// node (every .grad is filled by then), in the order queued, before backward() returns.
TEST(QueueCallback, RunsAfterTheLastNodeInOrder) {
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor b = tensor({3, 4}).requires_grad_();
  std::vector<std::string> events;
  a.register_hook([&](const Tensor&) {
    events.push_back("hook a");
    autograd::queue_callback([&] {
      events.push_back(b.grad().defined() && a.grad().defined() ? "first, grads filled" : "first, too early");
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
    autograd::queue_callback([&] { events.push_back("second"); });
    return Tensor();
  });
  b.register_hook([&](const Tensor&) {
    events.push_back("hook b");
    return Tensor();
  });
  (a * b).sum().backward();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[2], "first, grads filled");
  EXPECT_EQ(events[3], "second");
  EXPECT_EQ(events[4], "queued by a callback");
  events.clear();
  (a * b).sum().backward();  // the callbacks belonged to the first backward only
  EXPECT_EQ(events.size(), 5u);
}

TEST(QueueCallback, OutsideABackwardIsAnError) {
  expect_error([] { autograd::queue_callback([] {}); }, "[queue_callback] called outside a backward");
}
