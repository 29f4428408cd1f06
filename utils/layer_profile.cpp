// Note [Profiling a step]
// The planner predicts the peak of a checkpointed step from the bytes of a plain one, so the
// profile runs a whole plain training step and measures, module by module:
//  * the forward: live bytes after each module, the peak while it ran (its temporaries, such as
//    the inputs a module makes contiguous), whether it saved anything for backward, and whether
//    its output is still held by the graph once the forward is over (a weak pointer to its storage);
//  * the backward: the peak while backward was inside each module. An identity op between every two
//    modules (BoundaryReached) does nothing in the forward; in backward the engine runs it when the
//    gradient of the module before it is complete, i.e. when backward leaves one module for the
//    previous one, and it reads the peak statistic and resets it. Each module's backward peak thus
//    contains everything backward holds there: the gradient flowing in, the node's outputs and
//    temporaries, the parameter gradients made so far (and a copy, when one is made on first
//    arrival), next to what the forward still keeps. The planner measures rather than models all
//    of that. A saved-tensor hook also reads the live bytes when backward first uses a tensor the
//    module saved: that is when a checkpoint of the module recomputes it, and backward then holds
//    less than at its peak in the module, which comes later, among the module's own gradients.
//    The same hook notes whether the module saved its own output.
// The step's loss is DenseGradientLoss, whose backward sends a dense gradient of the output's
// shape, as a real loss does; a sum() would send a broadcast view of one number, cheaper than any
// loss a model is trained with.
// The cost of recomputing a module is counted from the shapes of the ops it runs (an op observer
// sees them), as a stand-in for time that is the same on every run, so the plan is too. Note
// [Work of an op] says how.
#include "utils/layer_profile.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "core/allocator.h"
#include "core/autograd/function.h"
#include "core/autograd/saved_tensor.h"
#include "utils/untraced_step.h"

namespace ember::utils {

namespace {

// The backward half of the profile: which module backward is in, and the peak of each.
struct BackwardWindows {
  Device device;
  int64_t base;
  std::vector<LayerProfile>* layers;
  size_t current;  // the module backward is in

  // Backward has finished `current` and moves to `layer`.
  void enter(size_t layer) {
    (*layers)[current].backward_peak = memory::stats(device).peak_bytes - base;
    memory::reset_peak(device);
    current = layer;
  }
};

// Identity in the forward; in backward, tells the windows that backward reached module `layer`.
struct BoundaryReached : autograd::Function<BoundaryReached> {
  static constexpr const char* name = "profile_boundary";
  struct State {
    BackwardWindows* windows;
    size_t layer;
  };
  static Tensor forward(autograd::Ctx&, State& s, const Tensor& x, BackwardWindows* windows, size_t layer) {
    s = {windows, layer};
    return x.detach();  // the same storage: the boundary costs no bytes
  }
  static autograd::Grads backward(autograd::Ctx&, const State& s, const Tensor& g) {
    s.windows->enter(s.layer);
    return {g};
  }
};

// A scalar whose gradient with respect to x is a dense tensor of x's shape.
struct DenseGradientLoss : autograd::Function<DenseGradientLoss> {
  static constexpr const char* name = "profile_loss";
  struct State {
    Shape shape;
    TensorOptions options;
  };
  static Tensor forward(autograd::Ctx&, State& s, const Tensor& x) {
    s = {x.shape(), TensorOptions(x.dtype()).with_device(x.device())};
    return zeros({}, s.options);
  }
  static autograd::Grads backward(autograd::Ctx&, const State& s, const Tensor&) { return {ones(s.shape, s.options)}; }
};

// Sums the work of the ops it observes (see the Note).
struct WorkCounter final : autograd::OpObserver {
  int64_t flops = 0;
  ArgumentsBefore args;  // of the op running now

  std::optional<Tensor> before(const char*, const std::vector<Tensor>& op_args) override {
    args = ArgumentsBefore::of(op_args);
    return std::nullopt;
  }
  void after(const char* op, const Tensor& output) override {
    flops += estimated_flops(op, args.tensors, output, args.written_over(output));
    args = {};
  }
};

// Keeps saved tensors as usual, noting that the module saved one, and the live bytes when backward
// first uses one of them: the moment a checkpoint of the module would recompute it.
autograd::SavedTensorHooks watching_saves(LayerProfile& layer, char& used, std::vector<std::weak_ptr<Storage>>& saved,
                                          Device device, int64_t base) {
  return {[&layer, &saved](const Tensor& t) -> std::any {
            layer.saves = true;
            saved.push_back(t.storage());
            return t;
          },
          [&layer, &used, device, base](const std::any& packed) {
            if (!used) {
              used = 1;
              layer.live_at_first_use = memory::stats(device).live_bytes - base;
            }
            return std::any_cast<Tensor>(packed);
          }};
}

}  // namespace

// Note [Work of an op]
// What recomputing an op costs is estimated from its tensors' shapes as a roofline: the op takes
// as long as the longer of its arithmetic and its memory traffic, and both are counted in the
// same unit, arithmetic operations, a byte moved counting as the kFlopsPerByte operations a core
// could have done while it streamed:
//     work = max(arithmetic, kFlopsPerByte * (bytes of the tensor arguments + bytes of the output))
// with 2 M N K arithmetic for a matmul (M N more with a bias), 2 per output element and weight
// element of its output channel for a convolution, 2 L S (E + Ev) per attention matrix for fused
// attention (q k^T and the weights times v), and one per output element for any other op.
// A matmul is bound by its arithmetic, an elementwise op, a softmax or a normalisation by its
// bytes: counted by arithmetic alone, a GELU over a [4096, 512] activation would cost 1/270 of
// the [4096, 128] x [128, 512] matmul before it, where it takes a good part of its time, and a
// plan would recompute it for free. kFlopsPerByte is a machine's balance, the float32 matmuls'
// arithmetic rate over the bytes per second that add, mul and gelu stream, measured with
// bench_core on the project's 2-core CPU (bench/RESULTS.md, "Figures that code comments used to
// quote"): 6. A GPU's balance is higher, which makes the same plans slightly pessimistic about
// arithmetic there. A view computes and moves nothing: its work is 0.
namespace {
constexpr int64_t kFlopsPerByte = 6;
}  // namespace

ArgumentsBefore ArgumentsBefore::of(const std::vector<Tensor>& args) {
  ArgumentsBefore before{args, {}};
  for (const Tensor& t : args) before.versions.push_back(t.defined() ? t.version() : 0);
  return before;
}

bool ArgumentsBefore::written_over(const Tensor& output) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].defined() && output.defined() && tensors[i].storage() == output.storage() &&
        tensors[i].version() != versions[i])
      return true;
  return false;
}

int64_t estimated_flops(const std::string& op, const std::vector<Tensor>& args, const Tensor& output,
                        bool written_over_argument) {
  if (output.numel() == 0) return 0;  // (and a convolution without output channels divides by none)
  int64_t bytes = static_cast<int64_t>(output.nbytes());
  for (const Tensor& t : args) {
    if (!t.defined()) continue;
    if (t.storage() == output.storage() && !written_over_argument) return 0;  // a view computes nothing
    bytes += static_cast<int64_t>(t.nbytes());
  }
  if (op == "fused_attention") {  // q [..., L, E], k [..., S, E], v [..., S, Ev]: q k^T and its product with v
    const int64_t rows = args.at(0).numel() / std::max<int64_t>(args[0].size(-1), 1);
    return std::max(2 * rows * args.at(1).size(-2) * (args[0].size(-1) + args.at(2).size(-1)), kFlopsPerByte * bytes);
  }
  int64_t per_output_element = 1;
  if (op == "matmul") per_output_element = 2 * args.at(0).size(-1) + (args.size() > 2 && args[2].defined());  // + bias
  else if (op == "conv2d") per_output_element = 2 * (args.at(1).numel() / args.at(1).size(0));
  return std::max(per_output_element * output.numel(), kFlopsPerByte * bytes);
}

std::vector<LayerProfile> profile_layers(const LayerChain& chain, const Tensor& sample) {
  EMBER_CHECK(chain.size() > 0, "[profile_layers] the chain of layers is empty");
  EMBER_CHECK(sample.defined(), "[profile_layers] the sample is an undefined tensor");
  std::vector<Tensor> leaves = chain.parameters;
  leaves.push_back(sample);
  const UntracedStep no_trace(leaves);
  const Device device = sample.device();
  const size_t n = chain.size();
  const int64_t base = memory::stats(device).live_bytes;
  std::vector<LayerProfile> layers(n);
  BackwardWindows windows{device, base, &layers, n - 1};
  std::vector<std::weak_ptr<Storage>> outputs(n);
  std::vector<char> used(n, 0);  // whether backward used a tensor the module saved

  Tensor out = sample;
  for (size_t i = 0; i < n; ++i) {
    LayerProfile& layer = layers[i];
    WorkCounter work;
    memory::reset_peak(device);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::weak_ptr<Storage>> saved;  // the storages of what the module saved
    {
      autograd::OpObserverGuard observe(&work);
      autograd::SavedTensorHooksGuard watch_saves(watching_saves(layer, used[i], saved, device, base));
      out = chain.links[i].forward(out);
    }
    layer.saves_own_output = std::ranges::any_of(saved, [&out](const auto& s) { return s.lock() == out.storage(); });
    layer.forward_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const MemoryStats stats = memory::stats(device);
    layer.name = chain.links[i].name;
    layer.live_after = stats.live_bytes - base;
    layer.forward_peak = stats.peak_bytes - base;
    layer.output_bytes = static_cast<int64_t>(out.nbytes());
    layer.forward_flops = work.flops;
    outputs[i] = out.storage();
    if (i + 1 < n && out.requires_grad()) out = BoundaryReached::apply(out, &windows, i);
  }
  // The last output is held by the caller during backward; the others only if saved.
  for (size_t i = 0; i + 1 < n; ++i) layers[i].output_saved = !outputs[i].expired();
  layers.back().output_saved = true;

  if (out.requires_grad()) {
    Tensor loss = DenseGradientLoss::apply(out);
    memory::reset_peak(device);
    loss.backward();
  }
  // Backward ends in module `current`; it never reached the modules before it (nothing there needs
  // a gradient), which hold at most what is left at the end.
  const MemoryStats end = memory::stats(device);
  layers[windows.current].backward_peak = end.peak_bytes - base;
  for (size_t i = 0; i < windows.current; ++i) layers[i].backward_peak = end.live_bytes - base;
  // A module whose saved tensors backward never used holds no recompute either; its peak bounds
  // the moment all the same.
  for (size_t i = 0; i < n; ++i)
    if (!used[i]) layers[i].live_at_first_use = layers[i].backward_peak;
  return layers;
}

}  // namespace ember::utils
